"""Markers of accepted requests in the cache directory (xgrammar2.validated), which let a
restarted API server skip converting a request it accepted before, and the package-source id
that keeps cache files of one version of the Python front ends from another."""

import errno
import os

import pytest

import xgrammar2.build_id as bid
import xgrammar2.disk_cache as dcm
import xgrammar2.validated as vm
from xgrammar2.validated import ValidatedRequests

KEY = ("json", '{"type": "integer"}')


def test_a_marker_is_seen_by_another_instance_with_the_same_options(tmp_path):
    a = ValidatedRequests(tmp_path, b"lenient=0")
    assert not a.seen(KEY)
    a.remember(KEY)
    a.remember(KEY)  # a second remember of the same key creates nothing
    b = ValidatedRequests(tmp_path, b"lenient=0")  # another process after a restart
    assert b.seen(KEY) and b.hits == 1
    assert not b.seen(("json", '{"type": "string"}'))
    markers = os.listdir(tmp_path / f"v{dcm.DISK_FORMAT_VERSION}" / "validated")
    assert len(markers) == 1 and markers[0].endswith(".ok")
    assert os.path.getsize(tmp_path / f"v{dcm.DISK_FORMAT_VERSION}" / "validated" / markers[0]) == 0


def test_other_options_or_key_fields_do_not_match(tmp_path):
    ValidatedRequests(tmp_path, b"lenient=0").remember(KEY)
    assert not ValidatedRequests(tmp_path, b"lenient=1").seen(KEY)
    # typed, prefix-free key encoding: the same text in another field layout is another key
    assert not ValidatedRequests(tmp_path, b"lenient=0").seen(("json" + KEY[1],))
    assert not ValidatedRequests(tmp_path, b"lenient=0").seen(("regex", KEY[1]))


def test_markers_of_other_package_sources_are_not_read(tmp_path, monkeypatch):
    ValidatedRequests(tmp_path).remember(KEY)
    monkeypatch.setattr(bid, "_id", b"\x01" * 32)  # another version of the front ends
    assert not ValidatedRequests(tmp_path).seen(KEY)


def test_package_source_id_follows_the_sources(tmp_path, monkeypatch):
    first = bid.package_source_id()
    assert len(first) == 32 and bid.package_source_id() == first
    monkeypatch.setattr(bid, "_id", None)
    assert bid.package_source_id() == first  # recomputed from the same files
    src = tmp_path / "pkg"
    src.mkdir()
    (src / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(bid.os.path, "abspath", lambda p: str(src / "build_id.py"))
    monkeypatch.setattr(bid, "_id", None)
    one = bid.package_source_id()
    (src / "a.py").write_text("x = 12\n")  # a front-end change
    monkeypatch.setattr(bid, "_id", None)
    assert bid.package_source_id() != one


def test_the_number_of_markers_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(vm, "_SCAN_EVERY", 5)
    v = ValidatedRequests(tmp_path, max_files=10)
    for i in range(40):
        v.remember(("regex", f"a{i}"))
    d = tmp_path / f"v{dcm.DISK_FORMAT_VERSION}" / "validated"
    assert len(os.listdir(d)) <= 10
    assert v.evictions >= 30
    assert v.seen(("regex", "a39"))  # the newest are kept
    with pytest.raises(ValueError):
        ValidatedRequests(tmp_path, max_files=0)


def test_an_unwritable_directory_degrades_with_one_warning(tmp_path, monkeypatch):
    real_open = os.open

    def ro_open(path, flags, *a):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, *a)

    monkeypatch.setattr(vm.os, "open", ro_open)
    v = ValidatedRequests(tmp_path)
    with pytest.warns(RuntimeWarning, match="cannot record validated requests"):
        v.remember(KEY)
    v.remember(("regex", "b"))  # no second warning, no exception
    assert not v.seen(KEY)


def test_a_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    if not hasattr(os, "getuid"):
        pytest.skip("no user ids on this platform")
    uid = os.getuid()
    monkeypatch.setattr(vm.os, "getuid", lambda: uid + 1)
    v = ValidatedRequests(tmp_path)
    with pytest.warns(RuntimeWarning, match="belongs to another user"):
        v.remember(KEY)
    assert not os.path.exists(tmp_path / f"v{dcm.DISK_FORMAT_VERSION}" / "validated" / "x")
    assert not v.seen(KEY)
