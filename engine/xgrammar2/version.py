"""Version of the xgrammar2 package (read statically by the build backend)."""

__version__ = "0.1.0"
