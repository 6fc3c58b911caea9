"""What the gate measures (docs/algorithm.md §3-4): the SEA filter, a Wiener low-pass keeping what a noisy latent
holds of its content, and the relative L1 distance between consecutive steps' views of the latent.

The paper's gate (``"sea"``) filters each step's latent at that step's sigma and compares it with the previous
step's view, which was filtered at the previous sigma. The difference holds two parts:

    F_t(x_t) - F_{t-1}(x_{t-1}) = F_t(x_t - x_{t-1}) + (F_t - F_{t-1})(x_{t-1})

the change of the latent seen through the filter, and the change of the filter itself, which the schedule alone
decides. Near sigma 1 the filter's pass band moves fast, so the second part is large exactly where a strongly
shifted schedule barely moves the latent, and the accumulated distance forces computes early. ``"sea_same_sigma"``
removes the schedule's part: both latents go through the current step's filter. At the last steps, where sigma
moves the filter little, both gates agree.

The published indicator (``"first_block"``, docs/first-block-indicator.md) reads another tensor with the same
filter: the first transformer block's timestep-modulated input on the vision tokens, which the host lays out as a
video of its channels (``vision_tokens.first_block_view``) and hands over at the stack's entry.
``"first_block_same_sigma"`` filters both of its views at the current sigma.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence

import torch

GATES = ("sea", "sea_same_sigma", "first_block", "first_block_same_sigma")
FIRST_BLOCK_GATES = ("first_block", "first_block_same_sigma")
"""The gates that read the first block's input instead of the sampler's latent (decided at the stack's entry)."""
SIGMA_MIN = 1e-6
SOUND_FILTER_POWER = 1.0
"""Exponent of the 1-D prior that filters a sound latent along its time axis (dim 2) in the joint gate."""
_EPS = 1e-16

class GainCache:
    """Per-run cache of the SEA gain as it multiplies an rfftn spectrum. A host sigma's gain is built on the host once
    per (axis lengths, sigma, power, device) and kept for the ``max_entries`` most recent keys (a run needs one per
    step, whatever the batch). A sigma that lives on the
    device (no host read) gets its gain built there on every call from axis priors kept per (length, power, device):
    a few elementwise operations, no transfer, no host wait."""

    def __init__(self, max_entries: int = 4) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._gains: OrderedDict[tuple, torch.Tensor] = OrderedDict()
        self._priors: dict[tuple, torch.Tensor] = {}

    def rfft_gain(self, shape: Sequence[int], sigma: float | torch.Tensor, power: float, device) -> torch.Tensor:
        """The gain for axes of lengths ``shape`` at ``sigma`` (a float, or a one-value tensor on ``device``),
        float32 on ``device``, mean 1 over the full grid: per axis the Wiener gain ``a p / (a^2 p + b^2)`` of the
        signal prior ``p = 1 / (|f|^power + eps)`` at clamped noise level ``b = sigma`` (``a = 1 - b``), over its own
        mean, multiplied out separably; the last axis keeps its first ``n // 2 + 1`` bins, exact because every
        factor is even in f. It depends only on (shape, sigma, power): one build serves every item and channel."""
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
    """An index for ``positions`` along one dimension: a slice when they are consecutive (a view, and no index tensor
    copied to the device, which from pageable host memory waits for the GPU), else the list."""
    if positions == tuple(range(positions[0], positions[-1] + 1)):
        return slice(positions[0], positions[-1] + 1)
    return list(positions)


def _to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """``tensor`` on ``device`` (to a GPU from pinned memory without a host wait: a copy from pageable memory would
    wait for the GPU's queue)."""
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
    """SEA-filtered ``latent`` in float32 (the gate keeps its views at this precision whatever the model dtype).

    One rfftn/irfftn pair over ``dims`` (time, height, width) for the whole tensor, on the float32 upcast; every
    other axis (batch, channels) is filtered independently with the same gain, so channels are never mixed.
    ``cache`` reuses the gain across calls at the same sigma; ``sigma`` may be a one-value tensor on the latent's
    device, whose gain is then built there without a host read."""
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
    """Per item (dim 0), ``mean|current - previous| / (mean|previous| + 1e-16)`` in float32, without a host sync.
    All +inf when shape, dtype or device differ, so a changed input always forces a compute."""
    if current.shape != previous.shape or current.dtype != previous.dtype or current.device != previous.device:
        return torch.full((current.shape[0],), float("inf"), dtype=torch.float32, device=current.device)
    cur, prev = current.float().flatten(1), previous.float().flatten(1)
    return (cur - prev).abs().mean(dim=1) / (prev.abs().mean(dim=1) + _EPS)


class Indicator:
    """The view the gate keeps of a branch's latent and the distance between two views (``gate`` of
    ``SeaCacheConfig``): ``"sea"`` keeps the latent filtered at its own step's sigma; ``"sea_same_sigma"`` keeps a
    float32 copy of the raw latent and filters both views at the current sigma (one FFT pair for both). ``at`` is
    the call's filter, the arguments of :func:`sea_filter_float32` after the tensor: (sigma, power, dims, gains).

    The first-block gates do the same on the first block's view (``reads_first_block``), but keep it in its own
    dtype, the model's, as diffusers does: half the bytes of float32 in a bf16 run (hundreds of MiB per branch at
    video sizes); the same-sigma variant's copy is then exact, the filtered view rounded as diffusers rounds it.

    With ``sound_weight`` > 0 and a call's sound latent ([B, C, T, ...], time on dim 2), the joint gate of an
    audio-video model: per item the video view and a float32 copy of the sound latent are kept side by side, and
    the distance is ``(video + weight * sound) / (1 + weight)``, the sound's taken on both sound latents filtered
    along time at the current sigma."""

    def __init__(self, gate: str, sound_weight: float = 0.0, power: float | None = None):
        self.filter_at_own_sigma = gate in ("sea", "first_block")
        self.reads_first_block = gate in FIRST_BLOCK_GATES
        self.sound_weight = sound_weight
        self.power = power

    def measure(self, latent: torch.Tensor, sigma, filter_sigma, groups: dict, previous: dict,
                gains: GainCache, sound: torch.Tensor | None = None):
        """``(views, sigma, distances)`` of one call: the view each branch keeps of ``latent`` [B, ...] (``groups``:
        branch -> its items; with a sound latent, the video's and the sound's views flattened per item and joined),
        the call's sigma as a host float, and each branch's distance to its view in ``previous``; sigma and the
        distances are read in one host read, in float64 (the decisions of the host float). The filter's exponent is
        ``power``, else 3 for a video (and for the first block's tokens, as the published indicator filters them),
        2 for one frame."""
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
        read = torch.cat(values).tolist() if values else []  # the call's one host read
        if isinstance(sigma, torch.Tensor):
            sigma, *read = read
        return views, float(sigma), dict(zip(measured, read))

    def distances(self, current: torch.Tensor, previous: torch.Tensor, at: tuple, shapes=None) -> torch.Tensor:
        """Per-item distance of this call's view to the previous one, without a host sync (``shapes``: the video's
        and the sound's view shapes where :meth:`measure` joined them). [B]"""
        if current.shape != previous.shape or current.device != previous.device:
            return item_distances(current, previous)  # +inf: a changed input computes
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
