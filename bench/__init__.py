"""Benchmarks run by `make bench` (`python -m bench [NAME ...] [--quick]`).

Each module here defines ``run(quick: bool) -> dict[str, object]``: it measures, prints a short table,
and returns its figures. Every benchmark reports throughput, peak memory and a ratio against a
baseline measured in the same run.
"""
