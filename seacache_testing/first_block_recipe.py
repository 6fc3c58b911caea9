"""diffusers' ``first_block`` SeaCache recipe in the pack's terms, for tests and benchmarks (docs/first-block-indicator.md):
the gate settings that make its decisions, the filtered view it compares, and the bytes a kept view holds."""

from __future__ import annotations

import torch

from seacache_core import SeaCacheConfig
from seacache_core.vision_tokens import VisionTokens, first_block_view
from seacache_core.sea_filter import GainCache, sea_filter_float32

PUBLISHED_THRESHOLD = 0.35
"""diffusers' ``first_block`` default threshold (``SeaCacheConfig.threshold`` in ``hooks/sea_cache.py`` at
613e4416). Thresholds do not carry over between this indicator and the raw-latent gates."""

PUBLISHED_POWER = 3.0
"""Exponent of the filter's power-law prior in diffusers' ``first_block`` indicator, for videos and images alike."""


def published_config(**overrides) -> SeaCacheConfig:
    """The pack's gate settings that make diffusers' ``first_block`` decisions on a ``first_block_view``: the
    ``first_block`` gate (each step filtered at its own sigma), threshold 0.35, exponent 3 for videos and images,
    the first and the last step computed, no floor on the steps nor cap on reuses in a row, and order 0 (a reused
    step adds the last computed residual unchanged). ``overrides`` replace any of them."""
    settings = dict(threshold=PUBLISHED_THRESHOLD, order=0, max_consecutive=-1, warmup_steps=1, end_steps=1,
                    min_steps=0, power=PUBLISHED_POWER, gate="first_block")
    return SeaCacheConfig(**{**settings, **overrides})


def first_block_indicator(modulated: torch.Tensor, tokens: VisionTokens, sigma: float | torch.Tensor,
                          power: float = PUBLISHED_POWER, cache: GainCache | None = None) -> torch.Tensor:
    """The SEA-filtered view of ``first_block_view`` in float32, ``[B, D, T', H, W]``: each item and channel
    filtered over (T', H, W) at the flow noise level ``sigma`` of this step. Its per-item relative L1 distance to
    the previous step's (``sea_filter.item_distances``) is diffusers' ``first_block`` distance of that item."""
    with torch.no_grad():
        return sea_filter_float32(first_block_view(modulated, tokens), sigma, power, (-3, -2, -1), cache)


def indicator_bytes(tokens: VisionTokens, width: int, element_size: int = 4) -> int:
    """Bytes one branch item's stored indicator holds: the view of the frames read, ``width`` channels per token,
    at ``element_size`` bytes each (the gate keeps it in the model dtype until the next step; 4 for float32)."""
    return element_size * tokens.frames_read * tokens.grid[1] * tokens.grid[2] * width
