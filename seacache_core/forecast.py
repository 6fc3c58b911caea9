"""Spectrum's global forecast of a skipped step (docs/spectrum.md): a Chebyshev ridge regression over a branch's
computed steps, centred on and blended with the Newton extrapolation of docs/algorithm.md §6."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .extrapolate import ResidualHistory, extrapolate_residual


def chebyshev_weights(steps: Sequence[int], step: int, degree: int, ridge_lambda: float,
                      step_span: float) -> list[float]:
    """Weights `c` with `sum(c[k] * y[k])` = the ridge-regression Chebyshev fit through (steps[k], y[k]) at `step`.

    The fit is linear in the data, so the weights depend on the step indices alone and any tensor history is
    forecast by one weighted sum (no per-element design matrix). Time: tau = 2 * step / step_span - 1 (step 0 at -1,
    `step_span` at +1). Basis: Chebyshev polynomials T_0..T_degree of tau. Fit: minimise
    ||X a - y||^2 + ridge_lambda * ||a||^2 over all degree + 1 coefficients (T_0 included, as Spectrum does), solved as
    the least-squares problem of X stacked on sqrt(ridge_lambda) * I, in float64 on the host. With ridge_lambda 0
    and fewer steps than degree + 1 this is the minimum-norm interpolant; with ridge_lambda 0 and at least
    degree + 1 distinct steps it reproduces exactly (up to rounding) any polynomial of degree <= `degree`.
    """
    if not steps:
        raise ValueError("chebyshev_weights needs at least one step")
    taus = torch.tensor([2.0 * s / step_span - 1.0 for s in steps] + [2.0 * step / step_span - 1.0],
                        dtype=torch.float64)
    columns = [torch.ones_like(taus), taus]
    for _ in range(2, degree + 1):
        columns.append(2.0 * taus * columns[-1] - columns[-2])
    basis = torch.stack(columns[:degree + 1], dim=1)  # (len(steps) + 1, degree + 1); the last row is `step`'s
    design, at = basis[:-1], basis[-1]
    augmented = torch.cat([design, math.sqrt(ridge_lambda) * torch.eye(degree + 1, dtype=torch.float64)])
    weights = torch.linalg.pinv(augmented).T @ at  # row k: what data row k contributes to the forecast
    return weights[:len(steps)].tolist()


class ChebyshevHistory(ResidualHistory):
    """A branch's last `capacity` stack residuals, forecast as Spectrum forecasts: `blend` times the Chebyshev ridge
    fit over all of them plus `1 - blend` times the Newton extrapolation of order `order` through the last
    `order + 1` (`extrapolate_residual`). Spectrum's blend weight w is `blend`, its local predictor is order 1.

    Storage, replacement of a repeated step, dropping on a shape change and CPU offload are `ResidualHistory`'s;
    only the number of records kept (`capacity`) and the prediction differ. At most `capacity` residuals are held.
    Both terms are linear in the records, so a prediction
    is one weighted sum: the weights come from the step indices on the host (`forecast_weights`), then the records
    move to `device` one at a time and accumulate into one float32 tensor, returned in `dtype`. `blend` 0 is exactly
    `extrapolate_residual` through the last `order + 1` records (Spectrum's local predictor follows its line as far as
    asked, without `ResidualHistory`'s order-1 reach limit).
    """

    def __init__(self, order: int, residual_storage: str = "compute", *, degree: int, ridge_lambda: float,
                 blend: float, capacity: int, step_span: float) -> None:
        super().__init__(order, residual_storage)
        self.degree, self.ridge_lambda, self.blend = degree, float(ridge_lambda), float(blend)
        self.capacity, self.step_span = capacity, step_span

    def weights(self, steps: Sequence[int], step: int) -> list[float]:
        """The weight of each record (at ``steps``) in the forecast at ``step`` (:func:`forecast_weights`)."""
        return forecast_weights(steps, step, self.order, self.degree, self.ridge_lambda, self.blend, self.step_span)

    def predict(self, step: int, device, dtype: torch.dtype) -> torch.Tensor:
        """Forecast residual at `step`, on `device` in `dtype` (float32 arithmetic on `device`)."""
        if not self._records:
            raise ValueError("ChebyshevHistory.predict needs at least one recorded residual")
        records = list(self._records)
        if self.blend == 0:
            tail = len(records) - min(len(records), self.order + 1)  # first record the Newton term reads
            predicted = extrapolate_residual([(r.step, self._on(r, device)) for r in records[tail:]], step,
                                             self.order).to(dtype)
            if any(predicted is r.residual for r in records):
                predicted = predicted.clone()  # never hand out a stored record the caller could modify in place
            return predicted
        weights = self.weights([r.step for r in records], step)
        forecast = torch.zeros(records[0].residual.shape, dtype=torch.float32, device=device)
        for record, weight in zip(records, weights):
            forecast.add_(self._on(record, device), alpha=weight)
        return forecast.to(dtype)


def newton_weights(steps: Sequence[int], step: int, order: int) -> list[float]:
    """Weights `n` with `sum(n[k] * y[k])` = `extrapolate_residual` through (steps[k], y[k]) at `step`: the same
    polynomial through the last `order + 1` records, in Lagrange form on host floats (the others weigh 0); one
    record, or a repeated step, gives the last record, as there."""
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
    """Weights `w` with `sum(w[k] * y[k])` = `ChebyshevHistory`'s forecast at `step` from records (steps[k], y[k]):
    the Newton extrapolation of `order` plus `blend` times the ridge fit of what it misses (the records' deviations
    from the Newton polynomial P through the last `order + 1` records), so a constant history is kept exactly
    (weights summing to 1) where the plain ridge shrinks it toward zero (docs/spectrum.md)."""
    fit = chebyshev_weights(steps, step, degree, ridge_lambda, step_span)
    newton = newton_weights(steps, step, order)
    at_records = [newton_weights(steps, s, order) for s in steps]  # fit(y - P(steps)) + P(step)
    fit = [c - sum(fit[k] * at_records[k][j] for k in range(len(steps))) + newton[j] for j, c in enumerate(fit)]
    return [blend * c + (1.0 - blend) * n for c, n in zip(fit, newton)]
