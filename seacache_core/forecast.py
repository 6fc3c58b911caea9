"""Spectrum's global forecast of a skipped step (docs/spectrum.md): a Chebyshev ridge regression over a branch's
computed steps, blended with the Newton extrapolation of docs/algorithm.md §6, and Spectrum's skip schedule."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .extrapolate import ResidualHistory, extrapolate_residual

# Spectrum's published setting (docs/spectrum.md): Chebyshev degree M, ridge lambda, the step count its time map
# spreads over [-1, 1], warm-up steps, initial window N and window growth alpha.
SPECTRUM_DEGREE = 4
SPECTRUM_RIDGE_LAMBDA = 0.1
SPECTRUM_STEP_SPAN = 50
SPECTRUM_WARMUP = 5
SPECTRUM_WINDOW = 2
SPECTRUM_ALPHA = 0.75
# Residuals one ChebyshevHistory keeps by default: every computed step of a 35-step run at 3x or more (11.7 calls;
# Spectrum's own schedule computes 12 of 35), so at the speeds the forecast is for its fit is Spectrum's fit over
# all computed steps, while memory stays at 12 residuals per branch (docs/spectrum.md, "Memory").
DEFAULT_CAPACITY = 12


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
    is one weighted sum: the weights come from the step indices on the host (`chebyshev_weights`, and
    `extrapolate_residual` applied to unit vectors for the Newton term, in float32), then the records move to
    `device` one at a time and accumulate into one float32 tensor, returned in `dtype`. `blend` 0 is exactly
    `ResidualHistory(order).predict` (the Newton arithmetic on the records themselves).
    """

    def __init__(self, order: int, residual_storage: str = "compute", *, degree: int = SPECTRUM_DEGREE,
                 ridge_lambda: float = SPECTRUM_RIDGE_LAMBDA, blend: float = 0.5, capacity: int = DEFAULT_CAPACITY,
                 step_span: float = SPECTRUM_STEP_SPAN) -> None:
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
        self.degree = degree
        self.ridge_lambda = float(ridge_lambda)
        self.blend = float(blend)
        self.capacity = capacity
        self.step_span = step_span

    def predict(self, step: int, device, dtype: torch.dtype) -> torch.Tensor:
        """Forecast residual at `step`, on `device` in `dtype` (float32 arithmetic on `device`)."""
        if not self._records:
            raise ValueError("ChebyshevHistory.predict needs at least one recorded residual")
        records = list(self._records)
        tail = len(records) - min(len(records), self.order + 1)  # first record the Newton term reads
        if self.blend == 0:
            predicted = extrapolate_residual([(r.step, self._on(r, device)) for r in records[tail:]], step,
                                             self.order).to(dtype)
            if any(predicted is r.residual for r in records):
                predicted = predicted.clone()  # never hand out a stored record the caller could modify in place
            return predicted
        weights = [self.blend * w for w in
                   chebyshev_weights([r.step for r in records], step, self.degree, self.ridge_lambda, self.step_span)]
        if self.blend < 1:  # the Newton term is linear in its records too: its weights are it applied to unit vectors
            units = torch.eye(len(records) - tail, dtype=torch.float64)
            newton = extrapolate_residual([(r.step, u) for r, u in zip(records[tail:], units)], step, self.order)
            for index, weight in enumerate(newton.tolist(), start=tail):
                weights[index] += (1.0 - self.blend) * weight
        forecast = torch.zeros(records[0].residual.shape, dtype=torch.float32, device=device)
        for record, weight in zip(records, weights):
            forecast.add_(self._on(record, device), alpha=weight)
        return forecast.to(dtype)


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
