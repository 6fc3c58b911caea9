"""Relative L1 distance between consecutive indicators (docs/algorithm.md §4)."""

from __future__ import annotations

import torch

_EPS = 1e-16


def _mismatch(current: torch.Tensor, previous: torch.Tensor) -> bool:
    return (
        current.shape != previous.shape
        or current.dtype != previous.dtype
        or current.device != previous.device
    )


def item_distances(current: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """Per-item rel_l1 along dim 0 as a float32 tensor, without a host sync.

    All +inf when shape, dtype or device differ, so a changed input always forces a compute.
    """
    if _mismatch(current, previous):
        return torch.full((current.shape[0],), float("inf"), dtype=torch.float32, device=current.device)
    cur = current.float().flatten(1)
    prev = previous.float().flatten(1)
    return (cur - prev).abs().mean(dim=1) / (prev.abs().mean(dim=1) + _EPS)


def rel_l1(current: torch.Tensor, previous: torch.Tensor) -> float:
    """mean|current - previous| / (mean|previous| + 1e-16) in float32; +inf on shape, dtype or device mismatch."""
    if _mismatch(current, previous):
        return float("inf")
    prev = previous.float()
    return ((current.float() - prev).abs().mean() / (prev.abs().mean() + _EPS)).item()

