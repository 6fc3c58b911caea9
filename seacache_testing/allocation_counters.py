"""Counters for tests and benchmarks of what the core allocates: the SEA gains a run builds and the host buffers a
residual history's CPU storage allocates (the product keeps no such counts)."""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager

import torch

from seacache_core.extrapolate import ResidualHistory
from seacache_core.sea_filter import GainCache


class CountingGainCache(GainCache):
    """A gain cache that counts the gains it builds for host sigmas (``builds``: its cache misses)."""

    def __init__(self, max_entries: int = 4) -> None:
        super().__init__(max_entries)
        self.builds = 0

    def rfft_gain(self, shape, sigma, power, device) -> torch.Tensor:
        cached = {id(gain) for gain in self._gains.values()}  # all alive until the call returns
        gain = super().rfft_gain(shape, sigma, power, device)
        self.builds += not isinstance(sigma, torch.Tensor) and id(gain) not in cached
        return gain


@contextmanager
def counting_host_buffers():
    """Counts, per residual history, the host buffers its "cpu" storage allocates while the block runs (a spare
    buffer taken again is not counted): yields a ``Counter`` keyed by the history."""
    counts: Counter = Counter()
    original = ResidualHistory._host_buffer

    def counting(self, like):
        spares = len(self._spare)
        buffer = original(self, like)
        counts[self] += len(self._spare) == spares
        return buffer

    ResidualHistory._host_buffer = counting
    try:
        yield counts
    finally:
        ResidualHistory._host_buffer = original


def offload_against_kept(offloaded, kept, steps, residuals, ahead: tuple[int, ...]) -> int:
    """Append the same residuals to a history with "cpu" storage and one without, asserting after each step that the
    offloaded records are host copies of their own and that both predict bit for bit at ``step + a`` for each ``a``
    of ``ahead``, and at the end that both hold equal records; returns the host buffers ``offloaded`` allocated."""
    with counting_host_buffers() as allocated:
        for step, residual in zip(steps, residuals):
            offloaded.append(step, residual)
            kept.append(step, residual)
            assert all(r.data_ptr() != residual.data_ptr() for _, r in offloaded.records)
            for at in (step + a for a in ahead):
                assert torch.equal(offloaded.predict(at, "cpu", torch.float32), kept.predict(at, "cpu", torch.float32))
    assert [s for s, _ in offloaded.records] == [s for s, _ in kept.records]
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(offloaded.records, kept.records))
    return allocated[offloaded]
