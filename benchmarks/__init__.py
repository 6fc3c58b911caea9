"""Benchmarks (each prints its numbers and has a smoke mode the suite runs), the quality proxies' training and
the Cosmos3 memory plan. Run a benchmark as ``python benchmarks/<name>.py``."""
