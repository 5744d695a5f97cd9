"""gc_pause: the collector is off inside, restored after; a caller's own gc.disable() is kept."""

import gc
import threading

from xgrammar2 import gc_pause


def test_paused_restores_and_nests():
    assert gc.isenabled()
    with gc_pause.paused():
        assert not gc.isenabled()
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_caller_disabled_stays_disabled():
    gc.disable()
    try:
        with gc_pause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_exception_restores():
    try:
        with gc_pause.paused():
            raise ValueError("x")
    except ValueError:
        pass
    assert gc.isenabled()


def test_threads_keep_it_off_until_the_last_leaves():
    inside, release = threading.Event(), threading.Event()

    def worker():
        with gc_pause.paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    with gc_pause.paused():
        pass
    assert not gc.isenabled()  # the worker is still inside
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_pausing_decorator_keeps_name_and_result():
    @gc_pause.pausing
    def f(x):
        """doc"""
        return (x, gc.isenabled())

    assert f(3) == (3, False) and f.__doc__ == "doc" and f.__name__ == "f"
    assert gc.isenabled()
