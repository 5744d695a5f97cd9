"""xgrammar2 benchmark harness: `python -m bench --help`. See docs/benchmarks/README.md."""
