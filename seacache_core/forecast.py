"""Spectrum's forecast of a skipped step (docs/spectrum.md): a Chebyshev ridge fit over a branch's computed steps,
centred on and blended with the Newton extrapolation of docs/algorithm.md §6."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .extrapolate import ResidualHistory, extrapolate_residual


def chebyshev_weights(steps: Sequence[int], step: int, degree: int, ridge_lambda: float,
                      step_span: float) -> list[float]:
    """Weights ``c`` with ``sum(c[k] * y[k])`` = the ridge-regression Chebyshev fit through (steps[k], y[k]) at
    ``step``: linear in the data, so one weighted sum forecasts any tensor history. Time ``tau = 2 step / step_span -
    1``; basis T_0..T_degree; solved in float64 on the host as least squares of the design stacked on
    ``sqrt(ridge_lambda) I``."""
    if not steps:
        raise ValueError("chebyshev_weights needs at least one step")
    taus = torch.tensor([2.0 * s / step_span - 1.0 for s in steps] + [2.0 * step / step_span - 1.0],
                        dtype=torch.float64)
    columns = [torch.ones_like(taus), taus]
    for _ in range(2, degree + 1):
        columns.append(2.0 * taus * columns[-1] - columns[-2])
    basis = torch.stack(columns[:degree + 1], dim=1)  # the last row is `step`'s
    design, at = basis[:-1], basis[-1]
    augmented = torch.cat([design, math.sqrt(ridge_lambda) * torch.eye(degree + 1, dtype=torch.float64)])
    weights = torch.linalg.pinv(augmented).T @ at
    return weights[:len(steps)].tolist()


class ChebyshevHistory(ResidualHistory):
    """A branch's last ``capacity`` residuals forecast by :func:`forecast_weights`, as one float32 weighted sum on
    ``device``; storage is ``ResidualHistory``'s. ``blend`` 0 is exactly the Newton extrapolation (without its order-1
    reach limit, as Spectrum's local predictor)."""

    def __init__(self, order: int, residual_storage: str = "compute", *, degree: int, ridge_lambda: float,
                 blend: float, capacity: int, step_span: float) -> None:
        super().__init__(order, residual_storage)
        self.degree, self.ridge_lambda, self.blend = degree, float(ridge_lambda), float(blend)
        self.capacity, self.step_span = capacity, step_span

    def weights(self, steps: Sequence[int], step: int) -> list[float]:
        """Each record's weight in the forecast at ``step``."""
        return forecast_weights(steps, step, self.order, self.degree, self.ridge_lambda, self.blend, self.step_span)

    def predict(self, step: int, device, dtype: torch.dtype) -> torch.Tensor:
        """The forecast residual at ``step`` on ``device`` in ``dtype``."""
        if not self._records:
            raise ValueError("ChebyshevHistory.predict needs at least one recorded residual")
        records = list(self._records)
        if self.blend == 0:
            tail = len(records) - min(len(records), self.order + 1)
            predicted = extrapolate_residual([(r.step, self._on(r, device)) for r in records[tail:]], step,
                                             self.order).to(dtype)
            if any(predicted is r.residual for r in records):
                predicted = predicted.clone()  # never hand out a stored record
            return predicted
        weights = self.weights([r.step for r in records], step)
        forecast = torch.zeros(records[0].residual.shape, dtype=torch.float32, device=device)
        for record, weight in zip(records, weights):
            forecast.add_(self._on(record, device), alpha=weight)
        return forecast.to(dtype)


def newton_weights(steps: Sequence[int], step: int, order: int) -> list[float]:
    """Weights with ``sum(n[k] * y[k])`` = ``extrapolate_residual`` at ``step`` (Lagrange form, host floats)."""
    tail = len(steps) - min(len(steps), order + 1)
    points = [float(s) for s in steps[tail:]]
    if len(points) == 1 or len(set(points)) != len(points):
        return [0.0] * (len(steps) - 1) + [1.0]
    weights = []
    for j, at_j in enumerate(points):
        weight = 1.0
        for k, at_k in enumerate(points):
            if k != j:
                weight *= (step - at_k) / (at_j - at_k)
        weights.append(weight)
    return [0.0] * tail + weights


def forecast_weights(steps: Sequence[int], step: int, order: int, degree: int, ridge_lambda: float, blend: float,
                     step_span: float) -> list[float]:
    """Weights of the forecast at ``step``: the Newton extrapolation plus ``blend`` times the ridge fit of what it
    misses (the records' deviations from the Newton polynomial), so a constant history is kept exactly."""
    fit = chebyshev_weights(steps, step, degree, ridge_lambda, step_span)
    newton = newton_weights(steps, step, order)
    at_records = [newton_weights(steps, s, order) for s in steps]  # fit(y - P(steps)) + P(step)
    fit = [c - sum(fit[k] * at_records[k][j] for k in range(len(steps))) + newton[j] for j, c in enumerate(fit)]
    return [blend * c + (1.0 - blend) * n for c, n in zip(fit, newton)]
