"""What the gate measures (docs/algorithm.md §3-4): the SEA filter, a Wiener low-pass keeping what a noisy latent holds
of its content, and the relative L1 distance between consecutive views. "sea" filters each step at its own sigma;
"sea_same_sigma" filters both views at the current one, leaving out the filter's own change along the schedule."""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch

GATES = ("sea", "sea_same_sigma", "first_block", "first_block_same_sigma")
FIRST_BLOCK_GATES = ("first_block", "first_block_same_sigma")  # read the first block's input, not the latent
SIGMA_MIN = 1e-6
SOUND_FILTER_POWER = 1.0  # the 1-D prior along a sound latent's time axis
_EPS = 1e-16

class GainCache:
    """A run's SEA gains: a host sigma's gain is built once per (axis lengths, sigma, power, device) and kept for the
    ``max_entries`` latest keys; a device sigma's is built on the device every call from cached axis priors, so no host
    read or transfer is needed."""

    def __init__(self, max_entries: int = 4) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._gains: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._priors: dict[tuple, torch.Tensor] = {}

    def rfft_gain(self, shape: Sequence[int], sigma: float | torch.Tensor, power: float, device) -> torch.Tensor:
        """The float32 gain on an rfftn spectrum over axes of lengths ``shape``: per axis the Wiener gain ``a p / (a^2 p
        + b^2)`` of the prior ``p = 1 / (|f|^power + eps)`` at ``b = sigma``, ``a = 1 - b``, normalised to mean 1,
        multiplied out separably (the last axis halved, exact as each factor is even in f)."""
        if not shape or any(int(n) < 1 for n in shape):
            raise ValueError(f"shape must be a non-empty sequence of positive lengths, got {tuple(shape)!r}")
        if not math.isfinite(power) or power <= 0:
            raise ValueError(f"power must be a finite number > 0, got {power!r}")
        device, on_device = torch.device(device), isinstance(sigma, torch.Tensor)
        if on_device:
            where, b = device, sigma.to(device=device, dtype=torch.float64).reshape(()).clamp(SIGMA_MIN, 1.0 - SIGMA_MIN)
        else:
            if not math.isfinite(float(sigma)):
                raise ValueError(f"sigma must be finite, got {sigma!r}")
            key = (tuple(int(n) for n in shape), float(sigma), float(power), device)
            if key in self._gains:
                self._gains.move_to_end(key)
                return self._gains[key]
            where, b = torch.device("cpu"), min(max(float(sigma), SIGMA_MIN), 1.0 - SIGMA_MIN)
        a, grid = 1.0 - b, None
        for axis, n in enumerate(shape):
            prior = self._priors.get((int(n), float(power), where))
            if prior is None:
                prior = 1.0 / (torch.fft.fftfreq(int(n), dtype=torch.float64).abs() ** power + _EPS)
                prior = self._priors[(int(n), float(power), where)] = _to_device(prior, where)
            gain = a * prior / (a * a * prior + b * b + _EPS)
            gain = gain / gain.mean()
            if axis == len(shape) - 1:
                gain = gain[: int(n) // 2 + 1]
            grid = gain if grid is None else grid.unsqueeze(-1) * gain
        grid = grid.to(torch.float32)
        if on_device:
            return grid
        grid = self._gains[key] = _to_device(grid, device)
        while len(self._gains) > self.max_entries:
            self._gains.popitem(last=False)
        return grid

    def clear(self) -> None:
        """Drop every cached gain and prior."""
        self._gains.clear()
        self._priors.clear()


def index_of(positions: tuple[int, ...]) -> slice | list[int]:
    """A slice for consecutive ``positions`` (a view, no index copied to the device), else the list."""
    if positions == tuple(range(positions[0], positions[-1] + 1)):
        return slice(positions[0], positions[-1] + 1)
    return list(positions)


def _to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """``tensor`` on ``device``, through pinned memory to a GPU (a pageable copy would wait for its queue)."""
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def sea_filter_float32(
    latent: torch.Tensor,
    sigma: float | torch.Tensor,
    power: float = 3.0,
    dims: Sequence[int] = (-3, -2, -1),
    cache: GainCache | None = None,
) -> torch.Tensor:
    """``latent`` SEA-filtered over ``dims`` in float32, every item and channel with the same gain."""
    axes = sorted({d % latent.ndim for d in dims if -latent.ndim <= d < latent.ndim})
    if len(axes) != len(dims) or not axes:
        raise ValueError(f"dims must name distinct axes of a {latent.ndim}-D latent, got {tuple(dims)!r}")
    lengths = [latent.shape[a] for a in axes]
    gain = (cache or GainCache()).rfft_gain(lengths, sigma, power, latent.device)
    view = [1] * latent.ndim
    for axis, size in zip(axes, gain.shape):
        view[axis] = size
    spectrum = torch.fft.rfftn(latent.float(), dim=axes)
    spectrum.mul_(gain.view(view))
    return torch.fft.irfftn(spectrum, s=lengths, dim=axes)


def item_distances(current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """Per item ``mean|current - previous| / mean|previous|`` in float32; +inf when they do not match."""
    if current.shape != previous.shape or current.dtype != previous.dtype or current.device != previous.device:
        return torch.full((current.shape[0],), float("inf"), dtype=torch.float32, device=current.device)
    cur, prev = current.float().flatten(1), previous.float().flatten(1)
    return (cur - prev).abs().mean(dim=1) / (prev.abs().mean(dim=1) + _EPS)


class Indicator:
    """The view a gate keeps of a branch and the distance between views. The first-block gates keep it in the model's
    dtype, as diffusers does; with a sound latent and ``sound_weight`` > 0 the distance is ``(video + weight * sound) /
    (1 + weight)``, the sound filtered along time."""

    def __init__(self, gate: str, sound_weight: float = 0.0, power: float | None = None):
        self.filter_at_own_sigma = gate in ("sea", "first_block")
        self.reads_first_block = gate in FIRST_BLOCK_GATES
        self.sound_weight = sound_weight
        self.power = power

    def measure(self, latent: torch.Tensor, sigma, filter_sigma, groups: dict, previous: dict,
                gains: GainCache, sound: torch.Tensor | None = None):
        """``(views, sigma, distances)`` of one call: each branch's view of ``latent`` (``groups``: branch -> items),
        sigma as a host float, and each branch's distance to its view in ``previous``, read in one host read in float64.
        The exponent is ``power``, else 3 for a video or the first block's tokens, 2 for one frame."""
        if latent.ndim not in (4, 5):
            raise ValueError(f"latent must be [B, C, T, H, W] or [B, C, H, W], got shape {tuple(latent.shape)}")
        power = 3.0 if latent.ndim == 5 and (latent.shape[2] > 1 or self.reads_first_block) else 2.0
        at = (sigma if filter_sigma is None else filter_sigma, power if self.power is None else float(self.power),
              (-3, -2, -1) if latent.ndim == 5 else (-2, -1), gains)
        with torch.no_grad():
            kept = latent.dtype if self.reads_first_block else torch.float32
            if self.filter_at_own_sigma:
                observed = sea_filter_float32(latent, *at).to(kept)
            else:
                observed = latent.detach().to(kept, copy=True)
            shapes = None
            if sound is not None and self.sound_weight > 0:
                shapes = (observed.shape[1:], sound.shape[1:])
                observed = torch.cat((observed.flatten(1), sound.detach().float().flatten(1)), 1)
            views = {key: observed[index_of(items)] for key, items in groups.items()}
            measured = {key: self.distances(views[key], view, at, shapes).mean() for key, view in previous.items()}
        values = [] if not isinstance(sigma, torch.Tensor) else [sigma.reshape(1).to(latent.device, torch.float64)]
        if measured:
            values.append(torch.stack(list(measured.values())).to(torch.float64))
        read = torch.cat(values).tolist() if values else []
        if isinstance(sigma, torch.Tensor):
            sigma, *read = read
        return views, float(sigma), dict(zip(measured, read))

    def distances(self, current: torch.Tensor, previous: torch.Tensor, at: tuple, shapes=None) -> torch.Tensor:
        """Per-item distance of this view to the previous one, without a host sync; ``shapes`` are the joined video and
        sound views' shapes. [B]"""
        if current.shape != previous.shape or current.device != previous.device:
            return item_distances(current, previous)
        if shapes is not None:
            (video_shape, sound_shape), n, b = shapes, math.prod(shapes[0]), len(current)
            video = self.distances(current[:, :n].view(b, *video_shape), previous[:, :n].view(b, *video_shape), at)
            both = torch.cat((current[:, n:], previous[:, n:])).view(2 * b, *sound_shape)
            both = sea_filter_float32(both, at[0], SOUND_FILTER_POWER, (2,), at[3])
            return (video + self.sound_weight * item_distances(both[:b], both[b:])) / (1 + self.sound_weight)
        if self.filter_at_own_sigma:
            return item_distances(current, previous)
        both = sea_filter_float32(torch.cat([current, previous]), *at)
        return item_distances(both[: len(current)], both[len(current):])
