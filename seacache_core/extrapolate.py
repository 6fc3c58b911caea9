"""Residual extrapolation over step indices (docs/algorithm.md §6) and the bounded history it reads."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import torch

from .config import RESIDUAL_DEVICES


def extrapolate_residual(history: Sequence[tuple[int, torch.Tensor]], step: int, order: int) -> torch.Tensor:
    """Newton polynomial through the last records of `history` ((step_index, residual), oldest first), at `step`.

    Uses the last `order + 1` records, or all of them when there are fewer (the highest order they allow).
    Divided differences over step indices, Horner evaluation, float32 arithmetic; returned in the residual
    dtype. Repeated step indices (a zero denominator) fall back to the last residual. Order k reproduces
    exactly any residual that is a polynomial of degree <= k in the step index.
    """
    if not history:
        raise ValueError("extrapolate_residual needs at least one recorded residual")
    if not 0 <= order <= 2:
        raise ValueError(f"order must be in 0..2, got {order!r}")
    points = list(history)[-(order + 1):]
    steps = [int(s) for s, _ in points]
    last = points[-1][1]
    if len(points) == 1 or len(set(steps)) != len(steps):
        return last
    coeffs = [r.float() for _, r in points]
    for level in range(1, len(points)):
        for j in range(len(points) - 1, level - 1, -1):
            coeffs[j] = (coeffs[j] - coeffs[j - 1]) / float(steps[j] - steps[j - level])
    value = coeffs[-1]
    for j in range(len(points) - 2, -1, -1):
        value = coeffs[j] + float(step - steps[j]) * value
    return value.to(last.dtype)


class ResidualHistory:
    """The last `order + 1` stack residuals of one branch with their step indices.

    `storage` is "compute" (kept where the residual was produced) or "cpu" (offloaded, moved back when
    predicting). Residuals keep their dtype. A residual of another shape than the stored ones drops them,
    since a polynomial through mismatched tensors means nothing.
    """

    def __init__(self, order: int, storage: str = "compute") -> None:
        if storage not in RESIDUAL_DEVICES:
            raise ValueError(f"storage must be one of {RESIDUAL_DEVICES}, got {storage!r}")
        self.order = order
        self.storage = storage
        self._records: deque[tuple[int, torch.Tensor]] = deque(maxlen=order + 1)

    def __len__(self) -> int:
        return len(self._records)

    @property
    def records(self) -> list[tuple[int, torch.Tensor]]:
        """The stored (step_index, residual) pairs, oldest first."""
        return list(self._records)

    def append(self, step: int, residual: torch.Tensor) -> None:
        """Record the residual of a computed step; the oldest record falls out beyond `order + 1`. A second
        residual for the newest step (a repeated evaluation at one sigma) replaces that step's record."""
        residual = residual.detach()
        if self.storage == "cpu":
            residual = residual.to("cpu")
        if self._records and self._records[-1][1].shape != residual.shape:
            self._records.clear()
        if self._records and self._records[-1][0] == int(step):
            self._records.pop()
        self._records.append((int(step), residual))

    def predict(self, step: int, device, dtype: torch.dtype) -> torch.Tensor:
        """Extrapolated residual at `step`, on `device` in `dtype` (CPU records move there before the arithmetic)."""
        history = [(s, r.to(device)) for s, r in self._records]
        predicted = extrapolate_residual(history, step, self.order).to(dtype)
        if any(predicted is r for _, r in self._records):
            predicted = predicted.clone()  # never hand out a stored record the caller could modify in place
        return predicted

    def clear(self) -> None:
        """Forget every record (new run, reset, or end of run)."""
        self._records.clear()
