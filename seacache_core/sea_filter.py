"""The SEA filter (docs/algorithm.md §3): a Wiener low-pass keeping what a noisy latent holds of its content."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch

SIGMA_MIN = 1e-6
_EPS = 1e-16


def _clamp_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not math.isfinite(sigma):
        raise ValueError(f"sigma must be finite, got {sigma!r}")
    return min(max(sigma, SIGMA_MIN), 1.0 - SIGMA_MIN)


def _check(shape: Sequence[int], power: float) -> None:
    if not shape or any(int(n) < 1 for n in shape):
        raise ValueError(f"shape must be a non-empty sequence of positive lengths, got {tuple(shape)!r}")
    if not math.isfinite(power) or power <= 0:
        raise ValueError(f"power must be a finite number > 0, got {power!r}")


def _prior(n: int, power: float) -> torch.Tensor:
    """The signal prior 1 / (|f|^power + eps) over the n FFT bins of one axis (float64, on the host)."""
    return 1.0 / (torch.fft.fftfreq(int(n), dtype=torch.float64).abs() ** power + _EPS)


def _wiener(priors: Sequence[torch.Tensor], b) -> list[torch.Tensor]:
    """Per-axis Wiener gains at clamped noise level ``b`` (a float, or a float64 tensor on the priors' device),
    each divided by its own mean so that their product has mean 1. The same float64 operations either way."""
    a = 1.0 - b
    gains = []
    for prior in priors:
        gain = a * prior / (a * a * prior + b * b + _EPS)
        gains.append(gain / gain.mean())
    return gains


def _axis_gains(shape: Sequence[int], sigma: float, power: float) -> list[torch.Tensor]:
    """Per-axis Wiener gains (float64), each divided by its own mean so that their product has mean 1."""
    _check(shape, power)
    return _wiener([_prior(n, power) for n in shape], _clamp_sigma(sigma))


def _outer(factors: Sequence[torch.Tensor], device) -> torch.Tensor:
    """Separable product of 1-D factors as a float32 grid on `device` (None: where the factors are)."""
    grid = factors[0]
    for factor in factors[1:]:
        grid = grid.unsqueeze(-1) * factor
    grid = grid.to(torch.float32)
    return grid if device is None else _to_device(grid, device)


def _rfft_gain(shape: Sequence[int], sigma: float, power: float, device) -> torch.Tensor:
    """The SEA gain over axes of lengths `shape`, as it multiplies an rfftn spectrum (float32, mean 1 over the
    full grid): the last axis keeps its first n // 2 + 1 bins.

    Exact because every factor is even in f, so the dropped bins mirror the kept ones. The gain depends only on
    (shape, sigma, power), which is why one build per step serves every batch item and channel.
    """
    factors = _axis_gains(shape, sigma, power)
    factors[-1] = factors[-1][: int(shape[-1]) // 2 + 1]
    return _outer(factors, device)


def _to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """``tensor`` on `device` (to a GPU from pinned memory without a host wait: a copy from pageable memory would
    wait for the GPU's queue)."""
    if device is not None and torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class GainCache:
    """Per-run cache of rfft gains keyed by (filtered shape, sigma, power, device), for sigmas the host knows.

    `builds` counts the gains built for host sigmas, so a test or benchmark can show that a step builds its gain once
    whatever the batch size. Only the `max_entries` most recently used gains are kept (a run needs one per step).
    A sigma that lives on the device (no host read) builds its gain there from axis priors kept per (length, power,
    device): a few elementwise operations on the axis lengths, no transfer and no host wait (not counted in
    `builds`: it is built on every call).
    """

    def __init__(self, max_entries: int = 4) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self.builds = 0
        self._gains: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._priors: dict[tuple, torch.Tensor] = {}

    def rfft_gain(self, shape: Sequence[int], sigma: float | torch.Tensor, power: float, device) -> torch.Tensor:
        """The rfft half of the gain for these axis lengths, built on first use and then served from the cache;
        for a tensor `sigma` (one value, on `device`) built on the device from the cached priors."""
        if isinstance(sigma, torch.Tensor):
            return self._device_gain(shape, sigma, power, device)
        key = (tuple(int(n) for n in shape), float(sigma), float(power), torch.device(device))
        gain = self._gains.get(key)
        if gain is None:
            gain = _rfft_gain(*key)
            self.builds += 1
            self._gains[key] = gain
            while len(self._gains) > self.max_entries:
                self._gains.popitem(last=False)
        else:
            self._gains.move_to_end(key)
        return gain

    def _device_gain(self, shape: Sequence[int], sigma: torch.Tensor, power: float, device) -> torch.Tensor:
        _check(shape, power)
        device = torch.device(device)
        priors = []
        for n in shape:
            key = (int(n), float(power), device)
            if key not in self._priors:
                self._priors[key] = _to_device(_prior(n, power), device)
            priors.append(self._priors[key])
        b = sigma.to(device=device, dtype=torch.float64).reshape(()).clamp(SIGMA_MIN, 1.0 - SIGMA_MIN)
        factors = _wiener(priors, b)
        factors[-1] = factors[-1][: int(shape[-1]) // 2 + 1]
        return _outer(factors, None)

    def clear(self) -> None:
        """Drop every cached gain and prior (the build count is kept)."""
        self._gains.clear()
        self._priors.clear()


def _filter_axes(ndim: int, dims: Sequence[int]) -> list[int]:
    axes = []
    for d in dims:
        if not -ndim <= d < ndim:
            raise ValueError(f"dims {tuple(dims)!r} out of range for a {ndim}-D latent")
        axes.append(d % ndim)
    if not axes or len(set(axes)) != len(axes):
        raise ValueError(f"dims must name distinct axes, got {tuple(dims)!r}")
    return sorted(axes)


def sea_filter_float32(
    latent: torch.Tensor,
    sigma: float | torch.Tensor,
    power: float = 3.0,
    dims: Sequence[int] = (-3, -2, -1),
    cache: GainCache | None = None,
) -> torch.Tensor:
    """SEA-filtered `latent` in float32 (the gate keeps indicators at this precision whatever the model dtype).

    One rfftn/irfftn pair over `dims` (time, height, width) for the whole tensor, run on the float32 upcast
    whatever the input dtype; every other axis (batch, channels) is filtered independently with the same gain,
    so channels are never mixed. Pass a `GainCache` to reuse the gain across calls at the same sigma. `sigma` may be
    a one-value tensor on the latent's device: the gain is then built there, without a host read.
    """
    axes = _filter_axes(latent.ndim, dims)
    lengths = [latent.shape[a] for a in axes]
    if cache is None and isinstance(sigma, torch.Tensor):
        cache = GainCache()
    if cache is None:
        gain = _rfft_gain(lengths, sigma, power, latent.device)
    else:
        gain = cache.rfft_gain(lengths, sigma, power, latent.device)
    view = [1] * latent.ndim
    for axis, size in zip(axes, gain.shape):
        view[axis] = size
    spectrum = torch.fft.rfftn(latent.float(), dim=axes)
    spectrum.mul_(gain.view(view))
    return torch.fft.irfftn(spectrum, s=lengths, dim=axes)

