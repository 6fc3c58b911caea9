"""Spectrum's global forecast of a skipped step (docs/spectrum.md): a Chebyshev ridge regression over a branch's
computed steps, blended with the Newton extrapolation of docs/algorithm.md §6, and Spectrum's skip schedule."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .config import SeaCacheConfig
from .extrapolate import ResidualHistory, extrapolate_residual

# Spectrum's published setting (docs/spectrum.md): Chebyshev degree M, ridge lambda, the step count its time map
# spreads over [-1, 1], warm-up steps, initial window N and window growth alpha.
SPECTRUM_DEGREE = 4
SPECTRUM_RIDGE_LAMBDA = 0.1
SPECTRUM_STEP_SPAN = 50
SPECTRUM_WARMUP = 5
SPECTRUM_WINDOW = 2
SPECTRUM_ALPHA = 0.75
DEFAULT_CAPACITY = SeaCacheConfig.chebyshev_capacity  # residuals kept by default (why 12: SeaCacheConfig)
CENTRES = ("none", "mean", "newton")  # what the ridge fits (forecast_weights)


def chebyshev_weights(steps: Sequence[int], step: int, degree: int, ridge_lambda: float,
                      step_span: float = SPECTRUM_STEP_SPAN) -> list[float]:
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
    only the number of records kept (`capacity`) and the prediction differ. At most `capacity` residuals are held
    (`buffers_allocated` host buffers with "cpu" storage). Both terms are linear in the records, so a prediction
    is one weighted sum: the weights come from the step indices on the host (`forecast_weights`), then the records
    move to `device` one at a time and accumulate into one float32 tensor, returned in `dtype`. `blend` 0 is exactly
    `extrapolate_residual` through the last `order + 1` records (Spectrum's local predictor follows its line as far as
    asked, without `ResidualHistory`'s order-1 reach limit).
    """

    def __init__(self, order: int, residual_storage: str = "compute", *, degree: int = SPECTRUM_DEGREE,
                 ridge_lambda: float = SPECTRUM_RIDGE_LAMBDA, blend: float = 0.5, capacity: int = DEFAULT_CAPACITY,
                 step_span: float = SPECTRUM_STEP_SPAN, centre: str = "none") -> None:
        super().__init__(order, residual_storage)
        if isinstance(order, bool) or not isinstance(order, int) or not 0 <= order <= 2:
            raise ValueError(f"order must be an integer in 0..2, got {order!r}")
        if isinstance(degree, bool) or not isinstance(degree, int) or degree < 0:
            raise ValueError(f"degree must be an integer >= 0, got {degree!r}")
        if not isinstance(ridge_lambda, (int, float)) or not math.isfinite(ridge_lambda) or ridge_lambda < 0:
            raise ValueError(f"ridge_lambda must be a finite number >= 0, got {ridge_lambda!r}")
        if not isinstance(blend, (int, float)) or not 0 <= blend <= 1:
            raise ValueError(f"blend must be a number in [0, 1] (1 = Chebyshev only, 0 = Newton only), got {blend!r}")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < max(order, degree) + 1:
            raise ValueError(f"capacity must be an integer >= max(order, degree) + 1 = {max(order, degree) + 1}, "
                             f"got {capacity!r}")
        if not isinstance(step_span, (int, float)) or not math.isfinite(step_span) or step_span <= 0:
            raise ValueError(f"step_span must be a finite number > 0, got {step_span!r}")
        if centre not in CENTRES:
            raise ValueError(f"centre must be one of {CENTRES}, got {centre!r}")
        self.degree = degree
        self.ridge_lambda = float(ridge_lambda)
        self.blend = float(blend)
        self.capacity = capacity
        self.step_span = step_span
        self.centre = centre

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
        weights = forecast_weights([r.step for r in records], step, self.order, self.degree, self.ridge_lambda,
                                   self.blend, self.step_span, self.centre)
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
                     step_span: float, centre: str = "none") -> list[float]:
    """Weights `w` with `sum(w[k] * y[k])` = `ChebyshevHistory`'s forecast at `step` from records (steps[k], y[k]):
    `blend` times the Chebyshev ridge fit plus `1 - blend` times the Newton extrapolation of `order`.

    `centre` is what the ridge fits (docs/spectrum.md, "Time map and centring"): "none" the records themselves, as Spectrum
    does, which shrinks the fit toward zero (its weights sum to less than 1); "mean" their deviations from their
    mean, added back; "newton" their deviations from the Newton polynomial through the last `order + 1` records,
    added back, so the forecast is the Newton extrapolation plus `blend` times the ridge fit of what it misses. Both
    centred fits reproduce a constant history exactly (weights summing to 1)."""
    if centre not in CENTRES:
        raise ValueError(f"centre must be one of {CENTRES}, got {centre!r}")
    fit = chebyshev_weights(steps, step, degree, ridge_lambda, step_span)
    newton = newton_weights(steps, step, order)
    if centre == "mean":
        shift = (1.0 - sum(fit)) / len(steps)
        fit = [c + shift for c in fit]
    elif centre == "newton":  # fit(y - P(steps)) + P(step), P the Newton polynomial: P(steps[k]) = N[k] . y
        at_records = [newton_weights(steps, s, order) for s in steps]
        fit = [c - sum(fit[k] * at_records[k][j] for k in range(len(steps))) + newton[j] for j, c in enumerate(fit)]
    return [blend * c + (1.0 - blend) * n for c, n in zip(fit, newton)]


def spectrum_schedule(num_steps: int, warmup: int = SPECTRUM_WARMUP, window: float = SPECTRUM_WINDOW,
                      alpha: float = SPECTRUM_ALPHA) -> list[bool]:
    """Which of a branch's `num_steps` calls Spectrum computes (True) rather than forecasts (docs/spectrum.md).

    The first `warmup` calls compute. After them a call computes when the count of forecast calls since the last
    computed one, plus one, is a multiple of floor(current window); the current window starts at `window` and
    grows by `alpha` (rounded to 3 decimals, as Spectrum does) after each computed call past the warm-up. So the
    gap between computed calls widens: N = 2, alpha = 0.75 computes 12 of 35 calls and 14 of 50.
    """
    if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 0:
        raise ValueError(f"num_steps must be an integer >= 0, got {num_steps!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"warmup must be an integer >= 1 (a forecast needs a computed call before it), got {warmup!r}")
    if not isinstance(window, (int, float)) or not math.isfinite(window) or window < 1:
        raise ValueError(f"window must be a finite number >= 1, got {window!r}")
    if not isinstance(alpha, (int, float)) or not math.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    computes = []
    current_window = window
    forecast_run = 0  # forecast calls since the last computed one
    for call in range(num_steps):
        compute = call < warmup or (forecast_run + 1) % math.floor(current_window) == 0
        if compute and call >= warmup:
            current_window = round(current_window + alpha, 3)
        forecast_run = 0 if compute else forecast_run + 1
        computes.append(compute)
    return computes
