"""What the gate measures between consecutive steps: the paper's SEA distance, or the same-sigma variant.

The paper's indicator filters each step's latent at that step's sigma and compares it with the previous step's
indicator, which was filtered at the previous sigma. The difference therefore holds two parts:

    F_t(x_t) - F_{t-1}(x_{t-1}) = F_t(x_t - x_{t-1}) + (F_t - F_{t-1})(x_{t-1})

the change of the latent seen through the filter, and the change of the filter itself, which the schedule
alone decides. Near sigma 1 the Wiener filter's pass band moves fast (its signal weight 1 - sigma doubles from
one step to the next), so the second part is large exactly where a strongly shifted schedule barely moves the
latent (docs/quality.md measures how much of the early distance this part is). The accumulated distance then
forces computes early and spends the skips late.

``"sea_same_sigma"`` removes the schedule's part: both latents go through the current step's filter, so the
distance is the relative change of the latent in the band the current noise level leaves readable. At the last
steps, where sigma moves the filter little, it equals the paper's distance.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .distance import item_distances

GATES = ("sea", "sea_same_sigma")

Filter = Callable[[torch.Tensor], torch.Tensor]


class SeaIndicator:
    """The paper's gate: the stored view is the latent filtered at its own step's sigma."""

    def observe(self, latent: torch.Tensor, sea_filter: Filter) -> torch.Tensor:
        """What the branch state keeps of this step's latent (float32, a new tensor)."""
        return sea_filter(latent)

    def distances(self, current: torch.Tensor, previous: torch.Tensor, sea_filter: Filter) -> torch.Tensor:
        """Per-item relative L1 distance of this step's view to the previous step's, without a host sync. [B]"""
        return item_distances(current, previous)


class SameSigmaIndicator:
    """Both latents through the current step's filter: the stored view is the raw latent (float32 copy)."""

    def observe(self, latent: torch.Tensor, sea_filter: Filter) -> torch.Tensor:
        """A float32 copy of the latent (the host may reuse its buffer)."""
        return latent.detach().to(torch.float32, copy=True)

    def distances(self, current: torch.Tensor, previous: torch.Tensor, sea_filter: Filter) -> torch.Tensor:
        """Per-item relative L1 distance of the two latents, both filtered at the current sigma (one FFT pair). [B]"""
        if current.shape != previous.shape or current.device != previous.device:
            return item_distances(current, previous)  # +inf: a changed input computes
        both = sea_filter(torch.cat([current, previous]))
        return item_distances(both[: len(current)], both[len(current) :])


SOUND_FILTER_POWER = 1.0
"""Exponent of the 1-D power-law prior that filters a sound latent along its time axis (dim 2: ``[B, C, T]`` for
Cosmos3, ``[B, C, T, F]`` for LTX-2) in the joint gate; the audio-video proxy's measurement used 1."""


class WithSound:
    """The joint gate of an audio-video call: ``base`` reads the video latent; per item the base's view of the video
    and a float32 copy of the sound latent are kept side by side, and the distance is the weighted mean
    ``(video + weight * sound) / (1 + weight)``, the sound's being the relative L1 distance of both sound latents
    filtered along time at the current sigma (``sound_filter``), as the same-sigma gate filters the video. Built by
    the gate for one call."""

    def __init__(self, base, weight: float, sound_filter: Filter):
        self.base, self.weight, self.sound_filter = base, weight, sound_filter
        self.shapes: tuple[torch.Size, torch.Size] | None = None

    def observe(self, latent: torch.Tensor, sea_filter: Filter, sound: torch.Tensor) -> torch.Tensor:
        """The base's view of the video and the sound latent, flattened per item and concatenated (float32)."""
        video = self.base.observe(latent, sea_filter)
        self.shapes = (video.shape[1:], sound.shape[1:])
        return torch.cat((video.flatten(1), sound.detach().float().flatten(1)), 1)

    def distances(self, current: torch.Tensor, previous: torch.Tensor, sea_filter: Filter) -> torch.Tensor:
        """Per-item weighted mean of the video's and the sound's distances, without a host sync. [B]"""
        if current.shape != previous.shape or current.device != previous.device:
            return item_distances(current, previous)  # +inf: a changed input computes
        (video_shape, sound_shape), n, b = self.shapes, math.prod(self.shapes[0]), len(current)
        video = self.base.distances(current[:, :n].view(b, *video_shape), previous[:, :n].view(b, *video_shape),
                                    sea_filter)
        both = self.sound_filter(torch.cat((current[:, n:], previous[:, n:])).view(2 * b, *sound_shape))
        return (video + self.weight * item_distances(both[:b], both[b:])) / (1 + self.weight)


def make_indicator(gate: str) -> SeaIndicator | SameSigmaIndicator:
    """The indicator of a ``SeaCacheConfig.gate`` value."""
    return {"sea": SeaIndicator, "sea_same_sigma": SameSigmaIndicator}[gate]()
