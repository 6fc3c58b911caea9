"""An independent reference of diffusers' ``first_block`` SeaCache indicator and gate (``hooks/sea_cache.py`` at
613e4416; the facts are listed in docs/first-block-indicator.md), for tests.

Written the plain way, apart from the pack's filter: one item at a time, laid out as diffusers lays it out
(tokens of the noisy frames picked from the generator stream by index, reshaped to (T, H, W, D)), a full complex
FFT over the three grid axes in float64, the separable Wiener gain normalised by its mean over the whole grid, and
the gate's rule step by step as ``SeaCacheSharedState.resolve_gate`` applies it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

SIGMA_CLAMP = 1e-6
EPS = 1e-16


def vision_indexes(grid: tuple[int, int, int], noisy_frames: Sequence[int] | None = None,
                   start: int = 0) -> torch.Tensor:
    """Positions in the generator stream of the tokens of ``noisy_frames`` (all frames: None), frame by frame, as
    diffusers' Cosmos3 adapter finds them (the vision item's sequence positions minus the text prefix, rows of the
    noisy frames only). In this pack's Cosmos3 the video tokens open the generator stream (``start`` 0)."""
    t, h, w = grid
    frames = range(t) if noisy_frames is None else noisy_frames
    return torch.cat([torch.arange(start + f * h * w, start + (f + 1) * h * w) for f in frames])


def reference_indicator(stream: torch.Tensor, indexes: torch.Tensor, shape: tuple[int, int, int], sigma: float,
                        power: float = 3.0) -> torch.Tensor:
    """One item's indicator in float64, ``(T', H, W, D)``: the tokens ``indexes`` of ``stream`` ``[N, D]`` (the
    first block's normalised generator input), reshaped to ``shape`` and filtered over its three axes."""
    video = stream.index_select(0, indexes).reshape(*shape, -1).double()
    s = min(max(float(sigma), SIGMA_CLAMP), 1.0 - SIGMA_CLAMP)
    signal, noise = 1.0 - s, s
    gain = torch.ones(shape, dtype=torch.float64)
    for axis, n in enumerate(shape):
        prior = 1.0 / (torch.fft.fftfreq(n, dtype=torch.float64).abs() ** power + EPS)
        axis_gain = signal * prior / (signal**2 * prior + noise**2 + EPS)
        view = [1, 1, 1]
        view[axis] = n
        gain = gain * axis_gain.reshape(view)
    gain = gain / gain.mean()
    spectrum = torch.fft.fftn(video, dim=(0, 1, 2))
    return torch.fft.ifftn(spectrum * gain[..., None], dim=(0, 1, 2)).real


def reference_distance(current: Sequence[torch.Tensor], previous: Sequence[torch.Tensor]) -> float:
    """The call's distance: per vision item mean |current - previous| / (mean |previous| + 1e-16), averaged over
    the items."""
    ratios = [float((c - p).abs().mean() / (p.abs().mean() + EPS)) for c, p in zip(current, previous, strict=True)]
    return sum(ratios) / len(ratios)


class ReferenceGate:
    """diffusers' decision rule for one cache context (one branch): step ``step`` of ``num_steps`` computes when it
    is one of the first ``retention_steps`` or last ``cache_end_steps`` steps, has no previous indicator, does not
    follow the previous step, or when the accumulated distance plus this step's reaches ``threshold``; it reuses
    otherwise. A compute clears the accumulated distance, a reuse keeps the sum; the previous indicator becomes
    this step's either way."""

    def __init__(self, threshold: float = 0.35, retention_steps: int = 1, cache_end_steps: int = 1):
        self.threshold, self.retention_steps, self.cache_end_steps = threshold, retention_steps, cache_end_steps
        self.previous: list[torch.Tensor] | None = None
        self.previous_step: int | None = None
        self.accumulated = 0.0
        self.distances: list[float | None] = []  # per decided step: the distance measured (None: forced)

    def computes(self, step: int, num_steps: int, indicator: list[torch.Tensor]) -> bool:
        """Whether this step runs the model (True) or reuses (False); updates the state."""
        forced = (
            (self.previous_step is not None and step != self.previous_step + 1)
            or step < self.retention_steps
            or step >= num_steps - self.cache_end_steps
            or self.previous is None
        )
        if forced:
            compute, candidate, distance = True, 0.0, None
        else:
            distance = reference_distance(indicator, self.previous)
            candidate = self.accumulated + distance
            compute = candidate >= self.threshold
        self.accumulated = 0.0 if compute else candidate
        self.previous, self.previous_step = indicator, step
        self.distances.append(distance)
        return compute
