"""Benchmarks (each prints its numbers and has a smoke mode the suite runs) and the quality proxies' trainer. Run
one from the repository root as ``python -m benchmarks.<name>``; what they share with the tests (the proxies, the
memory plan, the peer packs, the pair statistics) lives in ``seacache_testing``."""
