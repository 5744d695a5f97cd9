"""pytest plugin for the upstream-compatibility gate: ``import xgrammar`` -> xgrammar2.

Loaded with ``-p alias_plugin`` (our run only; ``--reference`` leaves it out and runs real
xgrammar). At plugin load, before collection:

* ``sys.modules["xgrammar"]`` is the ``xgrammar2`` package;
* a meta path finder placed first on ``sys.meta_path`` maps every ``xgrammar.X.Y`` import to
  ``xgrammar2.X.Y`` (the same module object, registered under both names). When
  ``xgrammar2.X.Y`` does not exist the import fails with ``ModuleNotFoundError: No module
  named 'xgrammar.X.Y'`` -- it never falls back to the real xgrammar installed beside it.

Attribute lookups (``xgr.Foo``, ``from xgrammar import Foo``) go straight to xgrammar2, so a
missing name shows up as the AttributeError / ImportError that a user would see.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

ALIAS = "xgrammar"
TARGET = "xgrammar2"


def _target_name(fullname: str) -> str:
    return TARGET + fullname[len(ALIAS):]


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target
        self._saved = None

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        # importlib overwrites __spec__ of the module it gets back; keep xgrammar2's own
        self._saved = (module, module.__spec__)
        return module

    def exec_module(self, module):
        saved_module, saved_spec = self._saved
        if saved_module is module:
            module.__spec__ = saved_spec


class XgrammarAliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        real = _target_name(fullname)
        try:
            found = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            found = None
        if found is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (alias of {real!r}, which xgrammar2 does not have)",
                name=fullname,
            )
        return importlib.util.spec_from_loader(fullname, _AliasLoader(real))


def install() -> None:
    # a real xgrammar imported before us (there should be none) must not leak into the run
    stale = [m for m in sys.modules if m == ALIAS or m.startswith(ALIAS + ".")]
    for name in stale:
        if not getattr(sys.modules[name], "__name__", "").startswith(TARGET):
            del sys.modules[name]
    if not any(isinstance(f, XgrammarAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, XgrammarAliasFinder())
    import xgrammar2

    sys.modules[ALIAS] = xgrammar2
    # submodules xgrammar2 has already imported are aliased eagerly as well
    for name, module in list(sys.modules.items()):
        if name.startswith(TARGET + ".") and module is not None:
            sys.modules.setdefault(ALIAS + name[len(TARGET):], module)


install()


def pytest_report_header(config):
    import xgrammar

    return [f"alias_plugin: xgrammar -> {xgrammar.__name__} ({xgrammar.__file__})"]
