"""Spectrum as published (arXiv 2603.01623, docs/spectrum.md) in the pack's forecast terms, for the peer benchmark,
the forecast study and their tests: its settings, its skip schedule, and its uncentred ridge fit (with the "mean"
centring the study compares); the product's forecast is ``seacache_core.forecast`` (Newton-centred)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from seacache_core.forecast import ChebyshevHistory, chebyshev_weights, forecast_weights, newton_weights

# Spectrum's published setting: Chebyshev degree M, ridge lambda, the step count its time map spreads over [-1, 1],
# warm-up steps, initial window N and window growth alpha.
SPECTRUM_DEGREE = 4
SPECTRUM_RIDGE_LAMBDA = 0.1
SPECTRUM_STEP_SPAN = 50
SPECTRUM_WARMUP = 5
SPECTRUM_WINDOW = 2
SPECTRUM_ALPHA = 0.75
CENTRES = ("none", "mean", "newton")  # what the ridge fits (centred_weights)


def centred_weights(steps: Sequence[int], step: int, order: int, degree: int, ridge_lambda: float, blend: float,
                    step_span: float, centre: str) -> list[float]:
    """``forecast_weights`` with another centring: "none" fits the records themselves, as Spectrum does, which
    shrinks the fit toward zero (its weights sum to less than 1); "mean" their deviations from their mean, added
    back; "newton" is the product's ``forecast_weights``."""
    if centre not in CENTRES:
        raise ValueError(f"centre must be one of {CENTRES}, got {centre!r}")
    if centre == "newton":
        return forecast_weights(steps, step, order, degree, ridge_lambda, blend, step_span)
    fit = chebyshev_weights(steps, step, degree, ridge_lambda, step_span)
    if centre == "mean":
        shift = (1.0 - sum(fit)) / len(steps)
        fit = [c + shift for c in fit]
    return [blend * c + (1.0 - blend) * n for c, n in zip(fit, newton_weights(steps, step, order))]


class SpectrumHistory(ChebyshevHistory):
    """A ``ChebyshevHistory`` whose fit is centred as ``centre`` says (:func:`centred_weights`), with Spectrum's
    published settings by default (its uncentred fit over a 50-step time map)."""

    def __init__(self, order: int, residual_storage: str = "compute", *, degree: int = SPECTRUM_DEGREE,
                 ridge_lambda: float = SPECTRUM_RIDGE_LAMBDA, blend: float = 0.5, capacity: int = 12,
                 step_span: float = SPECTRUM_STEP_SPAN, centre: str = "none") -> None:
        super().__init__(order, residual_storage, degree=degree, ridge_lambda=ridge_lambda, blend=blend,
                         capacity=capacity, step_span=step_span)
        if centre not in CENTRES:
            raise ValueError(f"centre must be one of {CENTRES}, got {centre!r}")
        self.centre = centre

    def weights(self, steps: Sequence[int], step: int) -> list[float]:
        return centred_weights(steps, step, self.order, self.degree, self.ridge_lambda, self.blend, self.step_span,
                               self.centre)


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
