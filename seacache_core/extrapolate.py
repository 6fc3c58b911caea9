"""Residual extrapolation over step indices (docs/algorithm.md §6) and the bounded history it reads."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .config import RESIDUAL_STORAGES


def extrapolate_residual(history: Sequence[tuple[int, torch.Tensor]], step: int, order: int) -> torch.Tensor:
    """The Newton polynomial through the last ``order + 1`` records of ``history`` ((step, residual), oldest first;
    fewer where fewer exist) at ``step``, in float32, returned in the residual's dtype; a repeated step gives the last
    residual. Order k reproduces any residual polynomial of degree <= k in the step."""
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


LOW_SHIFT, FULL_SHIFT = 3.0, 5.0
LOW_SHIFT_WEIGHT = 0.5
FULL_REACH = 2


def schedule_shift(flow_sigmas: Sequence[float]) -> float:
    """The shift ``s`` of a flow-convention schedule, read at its middle, where a shifted schedule has
    ``sigma = s / (1 + s)``; any other schedule gets the shift with its middle sigma."""
    if len(flow_sigmas) < 2:
        return 1.0
    middle = (len(flow_sigmas) - 1) / 2
    low = int(math.floor(middle))
    high = min(low + 1, len(flow_sigmas) - 1)
    sigma = flow_sigmas[low] + (middle - low) * (flow_sigmas[high] - flow_sigmas[low])
    sigma = min(max(float(sigma), 1e-6), 1 - 1e-6)
    return sigma / (1 - sigma)


def quadratic_weight(flow_sigmas: Sequence[float]) -> float:
    """Order 2's share of its quadratic term beyond ``FULL_REACH`` for a schedule: 0.5 up to shift 3, 1 from shift 5,
    log-linear between; at low shift a parabola followed past its records amplifies earlier errors more than its
    curvature helps (docs/quality.md, "Order 2 at low shift")."""
    shift = schedule_shift(flow_sigmas)
    rise = math.log(max(shift, 1e-6) / LOW_SHIFT) / math.log(FULL_SHIFT / LOW_SHIFT)
    return LOW_SHIFT_WEIGHT + (1 - LOW_SHIFT_WEIGHT) * min(max(rise, 0.0), 1.0)


@dataclass
class _Record:
    step: int
    residual: torch.Tensor
    ready: torch.cuda.Event | None = None  # "cpu" storage on CUDA: the copy has landed


class ResidualHistory:
    """A branch's last ``order + 1`` stack residuals with their steps. A residual of another shape drops the others.
    "cpu" storage is built for a GPU: host buffers (pinned for CUDA) are allocated once and reused; copies go out on a
    side stream and come back with ``non_blocking``, so the device never waits on the host."""

    def __init__(self, order: int, residual_storage: str = "compute", quadratic_weight: float = 1.0) -> None:
        if residual_storage not in RESIDUAL_STORAGES:
            raise ValueError(f"residual_storage must be one of {RESIDUAL_STORAGES}, got {residual_storage!r}")
        self.order = order
        self.quadratic_weight = quadratic_weight
        self.capacity = order + 1
        self.residual_storage = residual_storage
        self._records: deque[_Record] = deque()
        self._spare: list[torch.Tensor] = []  # host buffers of dropped records
        self._stream = None

    def __len__(self) -> int:
        return len(self._records)

    @property
    def records(self) -> list[tuple[int, torch.Tensor]]:
        """The stored (step, residual) pairs, oldest first."""
        return [(r.step, r.residual) for r in self._records]

    def append(self, step: int, residual: torch.Tensor) -> None:
        """Record a computed step's residual; the oldest falls out beyond ``capacity``, and a second residual for the
        newest step replaces it."""
        residual = residual.detach()
        if self._records and self._records[-1].residual.shape != residual.shape:
            self.clear()
        if self._records and self._records[-1].step == int(step):
            self._drop(self._records.pop())
        if len(self._records) == self.capacity:
            self._drop(self._records.popleft())
        record = _Record(int(step), residual)
        if self.residual_storage == "cpu":
            record.residual, record.ready = self._offload(residual)
        self._records.append(record)

    def _drop(self, record: _Record) -> None:
        if self.residual_storage == "cpu":
            self._spare.append(record.residual)

    def _host_buffer(self, like: torch.Tensor) -> torch.Tensor:
        """A spare host buffer shaped like ``like``, or a new one."""
        for i, buffer in enumerate(self._spare):
            if buffer.shape == like.shape and buffer.dtype == like.dtype:
                return self._spare.pop(i)
        return torch.empty(like.shape, dtype=like.dtype, device="cpu", pin_memory=like.is_cuda)

    def _offload(self, residual: torch.Tensor) -> tuple[torch.Tensor, torch.cuda.Event | None]:
        """A host copy of ``residual``, and on CUDA the event marking its arrival."""
        buffer = self._host_buffer(residual)
        if not residual.is_cuda:
            return buffer.copy_(residual), None
        if self._stream is None:
            self._stream = torch.cuda.Stream(residual.device)
        self._stream.wait_stream(torch.cuda.current_stream(residual.device))
        with torch.cuda.stream(self._stream):
            buffer.copy_(residual, non_blocking=True)
            ready = torch.cuda.Event()
            ready.record(self._stream)
        residual.record_stream(self._stream)
        return buffer, ready

    def _on(self, record: _Record, device) -> torch.Tensor:
        """An offloaded record on ``device``, from CUDA without a host wait."""
        device = torch.device(device)
        if record.ready is not None and device.type == "cuda":
            torch.cuda.current_stream(device).wait_event(record.ready)
            return record.residual.to(device, non_blocking=True)
        if record.ready is not None:
            record.ready.synchronize()
        return record.residual.to(device)

    def predict(self, step: int, device, dtype: torch.dtype) -> torch.Tensor:
        """The extrapolated residual at ``step`` on ``device`` in ``dtype``. Order 1 follows its line at most as far
        past the last record as the two lie apart, then holds it: a longer reach multiplies the difference of two close
        records. Order 2 with a ``quadratic_weight`` below 1 blends that held line with the parabola more than
        ``FULL_REACH`` steps (the default cap's reuses in a row) past its last record (docs/algorithm.md §6)."""
        history = [(r.step, r.residual.to(device) if r.ready is None else self._on(r, device)) for r in self._records]
        if self.order == 2 and self.quadratic_weight < 1 and len(history) >= 2 and step - history[-1][0] > FULL_REACH:
            weight, (previous, last) = self.quadratic_weight, history[-2:]
            line = extrapolate_residual(history[-2:], min(step, 2 * last[0] - previous[0]), 1).float()
            return ((1 - weight) * line + weight * extrapolate_residual(history, step, 2).float()).to(dtype)
        if self.order == 1 and len(history) == 2:
            step = min(step, 2 * history[1][0] - history[0][0])
        predicted = extrapolate_residual(history, step, self.order).to(dtype)
        if any(predicted is r.residual for r in self._records):
            predicted = predicted.clone()  # never hand out a stored record
        return predicted

    def clear(self) -> None:
        """Forget every record and host buffer."""
        self._records.clear()
        self._spare.clear()
