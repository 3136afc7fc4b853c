"""Benchmarks: ``python -m bench [scenario ...]``; each compares with a same-run reference."""
