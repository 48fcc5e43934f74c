"""The benchmarks behind ``scripts/bench.py``, one module per area (see that file's docstring)."""
