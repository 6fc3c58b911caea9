"""Spectrum's Chebyshev ridge forecast, its bounded history (seacache_core.forecast) and, for the peer benchmark, Spectrum's
own uncentred fit and skip schedule (seacache_testing.spectrum_forecast; docs/spectrum.md)."""

import pytest
import torch

from seacache_core.extrapolate import ResidualHistory, extrapolate_residual
from seacache_core.forecast import ChebyshevHistory, chebyshev_weights, forecast_weights, newton_weights
from seacache_testing.spectrum_forecast import SpectrumHistory, centred_weights, spectrum_schedule
from seacache_testing.allocation_counters import counting_host_buffers, offload_against_kept
from tests.test_cuda import sync_debug

COMPUTED = [0, 1, 2, 3, 4, 6, 8, 11, 15, 20, 25, 31]  # Spectrum's computed calls of a 35-step run (N 2, alpha 0.75)


def _poly(coeffs, s):
    return sum(c * (float(s) / 10) ** j for j, c in enumerate(coeffs))  # in s / 10, so values stay near 1


def _coeffs(degree, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 4, generator=g, dtype=torch.float64) for _ in range(degree + 1)]


def _filled(history, steps, value):
    for s in steps:
        history.append(s, value(s))
    return history


def _ridge_reference(steps, residuals, step, degree, ridge_lambda, step_span):
    """Spectrum's own formulation: per-element coefficients a = (X^T X + lambda I)^-1 X^T H, forecast x(step)^T a."""
    def basis(s):
        tau = 2.0 * s / step_span - 1.0
        row = [1.0, tau]
        while len(row) < degree + 1:
            row.append(2 * tau * row[-1] - row[-2])
        return row[:degree + 1]
    design = torch.tensor([basis(s) for s in steps], dtype=torch.float64)
    data = torch.stack([r.double().reshape(-1) for r in residuals])
    coef = torch.linalg.solve(design.T @ design + ridge_lambda * torch.eye(degree + 1, dtype=torch.float64),
                              design.T @ data)
    return (torch.tensor(basis(step), dtype=torch.float64) @ coef).reshape(residuals[0].shape)


@pytest.mark.parametrize("steps", [COMPUTED, [3, 5, 6, 9, 10], [0, 2, 4, 6, 8, 10, 12]])
@pytest.mark.parametrize("step_span", [50, 35])
def test_chebyshev_exact_for_polynomials_up_to_degree_without_ridge(steps, step_span):
    target = steps[-1] + 2
    for degree in range(5):
        coeffs = _coeffs(degree, seed=degree)
        history = _filled(SpectrumHistory(1, degree=4, ridge_lambda=0.0, blend=1.0, step_span=step_span),
                          steps, lambda s: _poly(coeffs, s).float())
        got = history.predict(target, "cpu", torch.float64)
        torch.testing.assert_close(got, _poly(coeffs, target), rtol=1e-5, atol=1e-5)


def test_chebyshev_not_exact_above_degree():
    coeffs = _coeffs(3, seed=3)
    history = _filled(SpectrumHistory(1, degree=2, ridge_lambda=0.0, blend=1.0, capacity=6), [3, 5, 6, 9, 10],
                      lambda s: _poly(coeffs, s).float())
    err = (history.predict(12, "cpu", torch.float64) - _poly(coeffs, 12)).abs().max()
    assert err > 1e-3 * coeffs[-1].abs().max()


@pytest.mark.parametrize("ridge_lambda", [0.1, 1.0])
@pytest.mark.parametrize("step_span", [50, 35])
def test_ridge_equals_spectrums_per_element_solution(ridge_lambda, step_span):
    gen = torch.Generator().manual_seed(1)
    residuals = [torch.randn(2, 3, 5, generator=gen) for _ in COMPUTED]
    history = SpectrumHistory(1, ridge_lambda=ridge_lambda, blend=1.0, step_span=step_span)
    for s, r in zip(COMPUTED, residuals):
        history.append(s, r)
    for target in (32, 33, 34):
        expected = _ridge_reference(COMPUTED, residuals, target, 4, ridge_lambda, step_span)
        torch.testing.assert_close(history.predict(target, "cpu", torch.float64), expected, rtol=1e-5, atol=1e-5)


def test_ridge_shrinks_toward_zero_as_in_closed_form():
    # degree 0: one coefficient, a = sum(y) / (K + lambda); a constant c over K = 3 steps forecasts 3c / 3.5
    history = _filled(SpectrumHistory(0, degree=0, ridge_lambda=0.5, blend=1.0, capacity=3), [4, 5, 6],
                      lambda s: torch.full((4,), 7.0))
    torch.testing.assert_close(history.predict(9, "cpu", torch.float64), torch.full((4,), 6.0, dtype=torch.float64))


def test_small_ridge_is_close_to_exact_and_larger_ridge_further():
    coeffs = _coeffs(4, seed=11)
    errors = []
    for ridge_lambda in (1e-9, 1e-3, 0.1):
        history = _filled(SpectrumHistory(1, ridge_lambda=ridge_lambda, blend=1.0), COMPUTED,
                          lambda s: _poly(coeffs, s).float())
        errors.append((history.predict(33, "cpu", torch.float64) - _poly(coeffs, 33)).abs().max().item())
    assert errors[0] < 1e-4
    assert errors[0] < errors[1] < errors[2]


def test_weights_depend_on_steps_only_and_match_spectrum_schedule_figures():
    # a constant history is forecast as sum(weights) times itself: the ridge's shrink at Spectrum's first forecast
    # (step 5 from the five warm-up steps) and at step 33 of a 35-step run (docs/spectrum.md)
    assert sum(chebyshev_weights([0, 1, 2, 3, 4], 5, 4, 0.1, 50)) == pytest.approx(0.9387, abs=1e-4)
    assert sum(chebyshev_weights(COMPUTED, 33, 4, 0.1, 50)) == pytest.approx(0.9457, abs=1e-4)
    assert sum(chebyshev_weights(COMPUTED, 33, 4, 0.0, 50)) == pytest.approx(1.0, abs=1e-9)
    with pytest.raises(ValueError):
        chebyshev_weights([], 3, 4, 0.1, 50)


@pytest.mark.parametrize("centre", ["mean", "newton"])
@pytest.mark.parametrize("blend", [0.5, 1.0])
def test_centred_fits_keep_a_constant_history_where_the_plain_ridge_shrinks_it(centre, blend):
    for steps, at in ((COMPUTED, 33), ([0, 1, 2, 3, 4], 5), ([2, 7], 9)):
        weights = forecast_weights(steps, at, 2, 4, 0.1, blend, 35) if centre == "newton" else \
            centred_weights(steps, at, 2, 4, 0.1, blend, 35, centre)
        assert sum(weights) == pytest.approx(1.0, abs=1e-6)
    assert sum(centred_weights(COMPUTED, 33, 2, 4, 0.1, 1.0, 35, "none")) == pytest.approx(0.9094, abs=1e-4)


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("centre", ["mean", "newton"])
def test_centred_forecast_is_the_base_plus_the_ridge_fit_of_the_deviations(order, centre):
    """"mean": the records' mean plus the ridge fit of their deviations from it; "newton": the Newton polynomial
    through the last order + 1 records plus the fit of the deviations from it at every record; each blended with
    the Newton extrapolation (written out here with Spectrum's per-element ridge solution)."""
    gen = torch.Generator().manual_seed(7 + order)
    residuals = [torch.randn(3, 4, generator=gen, dtype=torch.float64) for _ in COMPUTED]
    target, blend, span = 34, 0.5, 35
    newton = lambda at: extrapolate_residual(list(zip(COMPUTED, residuals)), at, order).double()  # noqa: E731
    if centre == "mean":
        base, base_at = [torch.stack(residuals).mean(0)] * len(COMPUTED), torch.stack(residuals).mean(0)
    else:
        base, base_at = [newton(s) for s in COMPUTED], newton(target)
    deviations = [r - b for r, b in zip(residuals, base)]
    fit = base_at + _ridge_reference(COMPUTED, deviations, target, 4, 0.1, span)
    expected = blend * fit + (1 - blend) * newton(target)
    if centre == "newton":  # the product's forecast (SeaCache Apply's residual_order "chebyshev")
        history = ChebyshevHistory(order, degree=4, ridge_lambda=0.1, blend=blend, capacity=12, step_span=span)
    else:
        history = SpectrumHistory(order, blend=blend, step_span=span, centre=centre)
    history = _filled(history, COMPUTED, lambda s: residuals[COMPUTED.index(s)])
    torch.testing.assert_close(history.predict(target, "cpu", torch.float64), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_newton_weights_weigh_the_records_as_the_extrapolation_does(order):
    steps = [3, 5, 6, 9]
    records = [torch.randn(5, generator=torch.Generator().manual_seed(s), dtype=torch.float64) for s in steps]
    for at in (10, 12, 4):
        weighted = sum(w * r for w, r in zip(newton_weights(steps, at, order), records))
        torch.testing.assert_close(weighted, extrapolate_residual(list(zip(steps, records)), at, order).double(),
                                   rtol=1e-5, atol=1e-5)
    assert newton_weights(steps, 10, 1) == pytest.approx([0, 0, -1 / 3, 4 / 3])
    assert newton_weights([4], 10, 2) == [1.0] and newton_weights([2, 4, 4], 10, 2) == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="centre"):
        centred_weights([1, 2], 3, 1, 1, 0.1, 0.5, 35, "median")


@pytest.mark.parametrize("order", [0, 1, 2])
def test_blend_zero_is_newton_bit_for_bit(order):
    gen = torch.Generator().manual_seed(order)
    steps = [0, 1, 2, 2, 3, 5, 6, 9, 10]  # a repeated step (replaced) and gaps
    residuals = [torch.randn(2, 5, 7, generator=gen).bfloat16() for _ in steps]
    blended, newton = SpectrumHistory(order, blend=0.0), ResidualHistory(order)
    for step, residual in zip(steps, residuals):
        blended.append(step, residual)
        newton.append(step, residual)
        last = newton.records[-(order + 1):]
        for at, dtype in ((step + 1, torch.bfloat16), (step + 3, torch.float32)):
            expected = extrapolate_residual(last, at, order).to(dtype)
            assert torch.equal(blended.predict(at, "cpu", dtype), expected)
        # within one spacing past the last record the seam's Newton history agrees (beyond it, order 1 holds)
        assert torch.equal(blended.predict(step + 1, "cpu", torch.float32), newton.predict(step + 1, "cpu", torch.float32))


@pytest.mark.parametrize("blend", [0.25, 0.5, 0.75])
def test_blend_is_convex_mix_of_chebyshev_and_float32_newton(blend):
    gen = torch.Generator().manual_seed(5)
    residuals = [torch.randn(3, 8, generator=gen).bfloat16() for _ in COMPUTED]
    mixed, chebyshev = SpectrumHistory(2, blend=blend), SpectrumHistory(2, blend=1.0)
    for s, r in zip(COMPUTED, residuals):
        mixed.append(s, r)
        chebyshev.append(s, r)
    newton = extrapolate_residual([(s, r.float()) for s, r in zip(COMPUTED, residuals)], 33, 2)
    expected = blend * chebyshev.predict(33, "cpu", torch.float32) + (1 - blend) * newton
    torch.testing.assert_close(mixed.predict(33, "cpu", torch.float32), expected, rtol=1e-6, atol=1e-6)


def test_blend_one_on_linear_history_is_exact_when_ridge_is_zero_and_newton_is_not_read():
    # order 0 Newton would return the last record (wrong for a line); blend 1 must not read it at all
    history = _filled(SpectrumHistory(0, ridge_lambda=0.0, blend=1.0), COMPUTED, lambda s: torch.full((2,), 3.0 * s))
    torch.testing.assert_close(history.predict(34, "cpu", torch.float64), torch.full((2,), 102.0, dtype=torch.float64))


@pytest.mark.parametrize("storage", ["compute", "cpu"])
def test_history_bounded_to_capacity(storage):
    history = SpectrumHistory(1, storage, capacity=6)
    with counting_host_buffers() as allocated:
        for step in range(20):
            history.append(step, torch.full((2,), float(step)))
            assert len(history) <= 6
    assert [s for s, _ in history.records] == list(range(14, 20))
    assert allocated[history] == (6 if storage == "cpu" else 0)  # one host buffer per kept record, reused after
    history.clear()
    assert len(history) == 0


@pytest.mark.parametrize("blend", [0.0, 0.5, 1.0])
def test_cpu_storage_matches_compute_storage_bit_for_bit(blend):
    gen = torch.Generator().manual_seed(2)
    steps = [0, 1, 2, 2, 3, 4, 6, 8, 11, 15, 20, 25, 31, 33]
    residuals = [torch.randn(2, 5, 7, generator=gen).bfloat16() for _ in steps]
    offloaded = SpectrumHistory(1, "cpu", blend=blend, capacity=8)
    kept = SpectrumHistory(1, blend=blend, capacity=8)
    assert offload_against_kept(offloaded, kept, steps, residuals, ahead=(1, 3)) == 8


def test_shape_change_drops_history_and_predict_contract():
    history = SpectrumHistory(1)
    history.append(0, torch.zeros(2, 3))
    history.append(1, torch.zeros(2, 3))
    history.append(2, torch.ones(4, 3))
    assert [s for s, _ in history.records] == [2]
    got = history.predict(3, "cpu", torch.float16)
    assert got.shape == (4, 3) and got.dtype == torch.float16
    with pytest.raises(ValueError):
        SpectrumHistory(1).predict(3, "cpu", torch.float32)


@pytest.mark.parametrize("blend", [0.0, 1.0])
def test_predict_never_returns_a_stored_tensor(blend):
    history = SpectrumHistory(0, degree=0, ridge_lambda=0.0, blend=blend, capacity=1)
    history.append(0, torch.ones(3))
    history.predict(1, "cpu", torch.float32).mul_(5)
    assert torch.equal(history.records[0][1], torch.ones(3))


def _computed(schedule):
    return [i for i, c in enumerate(schedule) if c]


def test_schedule_published_settings():
    # warm-up 0-4; then floor(window) 2, 2, 3, 4, 5, 5, 6, 7, 8, 8 as the window grows 2, 2.75, 3.5, ... by 0.75:
    # the README's "14 full network passes" at 50 steps
    assert _computed(spectrum_schedule(50)) == [0, 1, 2, 3, 4, 6, 8, 11, 15, 20, 25, 31, 38, 46]
    assert _computed(spectrum_schedule(35)) == COMPUTED
    # alpha 3: floors 2, 5, 8, 11, 14: the README's "10 network passes"
    assert _computed(spectrum_schedule(50, alpha=3.0)) == [0, 1, 2, 3, 4, 6, 11, 19, 30, 44]


def test_schedule_hand_worked_cases():
    # window 2.5, alpha 0.5, warm-up 1: floors 2, 3, 3, 4, 4 -> gaps 2, 3, 3, 4, 4
    assert _computed(spectrum_schedule(17, warmup=1, window=2.5, alpha=0.5)) == [0, 2, 5, 8, 12, 16]
    # alpha 0 keeps the window: every third call after the warm-up
    assert _computed(spectrum_schedule(12, warmup=2, window=3, alpha=0.0)) == [0, 1, 4, 7, 10]
    # the window is rounded to 3 decimals after each growth: 1 + 5 * 0.2 is 2.0 (unrounded floats give 1.999...)
    assert _computed(spectrum_schedule(10, warmup=1, window=1, alpha=0.2)) == [0, 1, 2, 3, 4, 5, 7, 9]
    assert spectrum_schedule(4, warmup=9) == [True] * 4
    assert spectrum_schedule(0) == []


@pytest.mark.parametrize("kwargs", [
    {"num_steps": -1}, {"num_steps": 3.0}, {"warmup": 0}, {"window": 0.5}, {"window": float("inf")}, {"alpha": -1},
])
def test_schedule_bad_settings_raise(kwargs):
    kwargs = {"num_steps": 35, **kwargs}
    with pytest.raises(ValueError):
        spectrum_schedule(**kwargs)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_offload_from_cuda_waits_on_the_device_only_and_matches_compute_storage():
    history = SpectrumHistory(1, residual_storage="cpu", capacity=6)
    kept = SpectrumHistory(1, capacity=6)
    residuals = [torch.randn(2, 4096, 512, device="cuda", dtype=torch.bfloat16) for _ in range(10)]
    with counting_host_buffers() as allocated:
        for step in range(5):
            history.append(step, residuals[step])
            kept.append(step, residuals[step])
        with sync_debug("error"):  # any host wait raises
            for step in range(5, 10):
                predicted = history.predict(step, torch.device("cuda"), torch.bfloat16)
                history.append(step, residuals[step])
    assert all(r.is_pinned() for _, r in history.records) and allocated[history] == 6
    for step in range(5, 9):
        kept.append(step, residuals[step])
    assert torch.equal(predicted, kept.predict(9, torch.device("cuda"), torch.bfloat16))
