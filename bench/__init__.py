"""Benchmarks: each prints ratios against a baseline measured in the same run; run them as `python -m bench.NAME`
(or `python bench/NAME.py`)."""
