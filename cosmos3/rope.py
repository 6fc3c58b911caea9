"""Cosmos3 interleaved 3D multimodal rotary embedding (mRoPE) and the joint-sequence positions."""

from __future__ import annotations

import torch

from .config import Cosmos3Config


def text_positions(length: int, device=None) -> torch.Tensor:
    """Positions of ``length`` text tokens: 0..L-1 on the temporal, height and width axes alike. [3, L]"""
    return torch.arange(length, dtype=torch.float32, device=device).expand(3, -1)


def vision_positions(
    config: Cosmos3Config, text_length: int, grid: tuple[int, int, int], fps: float | None, device=None
) -> torch.Tensor:
    """Positions of the patch grid ``(T, H, W)`` that follows a prompt of ``text_length`` tokens. [3, T*H*W]

    The temporal axis starts after the text plus the modality margin; with fps modulation (video only) frame
    ``i`` sits at ``i / (fps / tc) * (base_fps / tc)`` so clips at other frame rates keep the trained spacing.
    Height and width restart at 0 (``unified_3d_mrope_reset_spatial_ids``).
    """
    t, h, w = grid
    offset = text_length + config.unified_3d_mrope_temporal_modality_margin
    frames = torch.arange(t, dtype=torch.float32, device=device)
    if config.enable_fps_modulation and fps is not None and t > 1:
        tc = config.temporal_compression
        frames = frames / (float(fps) / tc) * (float(config.base_fps) / tc) + offset
    else:
        frames = frames + offset
    t_ids = frames.view(t, 1, 1).expand(t, h, w)
    h_ids = torch.arange(h, dtype=torch.float32, device=device).view(1, h, 1).expand(t, h, w)
    w_ids = torch.arange(w, dtype=torch.float32, device=device).view(1, 1, w).expand(t, h, w)
    if not config.unified_3d_mrope_reset_spatial_ids:
        h_ids = h_ids + offset
        w_ids = w_ids + offset
    return torch.stack([t_ids.flatten(), h_ids.flatten(), w_ids.flatten()])


def inverse_frequencies(config: Cosmos3Config, device=None) -> torch.Tensor:
    """Rotary inverse frequencies ``theta^(-2i/d)`` in float32. [head_dim / 2]"""
    d = config.head_dim
    return 1.0 / (config.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32, device=device) / d))


def rope_cos_sin(config: Cosmos3Config, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cos/sin tables for positions ``[..., 3, N]``: frequency j takes the height axis when j % 3 == 1 and the
    width axis when j % 3 == 2 (within their sections), the temporal axis otherwise. Each [..., N, head_dim]."""
    inv = inverse_frequencies(config, positions.device)
    angles = positions.float().unsqueeze(-1) * inv  # [..., 3, N, D/2]
    j = torch.arange(inv.shape[0], device=positions.device)
    _, sec_h, sec_w = config.rope_axes_dim
    axis = torch.zeros_like(j)
    axis[(j % 3 == 1) & (j < 3 * sec_h)] = 1
    axis[(j % 3 == 2) & (j < 3 * sec_w)] = 2
    picked = angles.gather(-3, axis.view(1, 1, -1).expand(*angles.shape[:-3], 1, angles.shape[-2], -1)).squeeze(-3)
    emb = torch.cat((picked, picked), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate ``x [B, heads, N, D]`` by tables ``[B, N, D]`` (half-split rotation)."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)
