"""Integrations with other libraries.

``xgrammar2.contrib.hf``: a Hugging Face transformers ``LogitsProcessor`` for
``model.generate()``. It is imported on first use (``import xgrammar2.contrib.hf`` or
``xgrammar2.contrib.hf``), so importing xgrammar2 loads neither torch nor transformers.
"""

from typing import Any

__all__ = ["hf"]


def __getattr__(name: str) -> Any:
    if name == "hf":
        import importlib

        # import_module, not `from . import hf`: the latter asks this __getattr__ again.
        return importlib.import_module(".hf", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
