"""Build hook: the cffi extension cannot be declared in pyproject.toml (setuptools has no
`cffi_modules` key there), so it lives here. Everything else is in pyproject.toml."""

from setuptools import setup

setup(cffi_modules=["engine/xgrammar2/_build_ffi.py:ffibuilder"])
