"""Residual extrapolation and its bounded history (docs/algorithm.md §6)."""

import pytest
import torch

from seacache_core import ResidualHistory, extrapolate_residual
from seacache_testing.allocation_counters import counting_host_buffers, offload_against_kept
from tests.test_cuda import sync_debug


def _poly(coeffs, s):
    return sum(c * float(s) ** j for j, c in enumerate(coeffs))


def _coeffs(degree, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 4, generator=g) for _ in range(degree + 1)]


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("steps", [(3, 5, 6), (0, 1, 2), (10, 12, 17)])
def test_exact_for_polynomials_up_to_order(order, steps):
    target = steps[-1] + 2
    for degree in range(order + 1):
        coeffs = _coeffs(degree, seed=degree)
        history = [(s, _poly(coeffs, s)) for s in steps]
        got = extrapolate_residual(history, target, order)
        torch.testing.assert_close(got, _poly(coeffs, target), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_not_exact_for_degree_above_order(order):
    coeffs = _coeffs(order + 1, seed=7)
    history = [(s, _poly(coeffs, s)) for s in (3, 5, 6)]
    got = extrapolate_residual(history, 8, order)
    err = (got - _poly(coeffs, 8)).abs().max()
    assert err > 0.1 * coeffs[-1].abs().max()


def test_order_one_formula():
    r0, r1 = torch.randn(5), torch.randn(5)
    got = extrapolate_residual([(2, r0), (4, r1)], 7, 1)
    torch.testing.assert_close(got, r1 + (r1 - r0) * (7 - 4) / (4 - 2))


def test_fewer_records_use_highest_order_they_allow():
    coeffs = _coeffs(1)
    history = [(s, _poly(coeffs, s)) for s in (4, 6)]
    torch.testing.assert_close(extrapolate_residual(history, 9, 2), _poly(coeffs, 9), rtol=1e-5, atol=1e-4)
    single = torch.randn(3)
    assert torch.equal(extrapolate_residual([(4, single)], 9, 2), single)


def test_zero_denominator_falls_back_to_last():
    r0, r1 = torch.randn(4), torch.randn(4)
    assert torch.equal(extrapolate_residual([(3, r0), (3, r1)], 5, 1), r1)
    assert torch.equal(extrapolate_residual([(1, r0), (3, r0), (3, r1)], 5, 2), r1)


def test_float32_arithmetic_returned_in_residual_dtype():
    r0, r1 = torch.randn(64).bfloat16(), torch.randn(64).bfloat16()
    got = extrapolate_residual([(0, r0), (1, r1)], 2, 1)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, (2 * r1.float() - r0.float()).bfloat16())


def test_empty_history_raises():
    with pytest.raises(ValueError):
        extrapolate_residual([], 3, 1)


@pytest.mark.parametrize("order", [0, 1, 2])
def test_history_bounded_to_order_plus_one(order):
    history = ResidualHistory(order)
    for step in range(10):
        history.append(step, torch.full((2,), float(step)))
        assert len(history) <= order + 1
    assert [s for s, _ in history.records] == list(range(10 - order - 1, 10))
    history.clear()
    assert len(history) == 0


def test_history_drops_records_of_another_shape():
    history = ResidualHistory(2)
    history.append(0, torch.zeros(2, 3))
    history.append(1, torch.zeros(2, 3))
    history.append(2, torch.zeros(4, 3))
    assert [s for s, _ in history.records] == [2]


def test_history_cpu_storage_and_predict_dtype():
    history = ResidualHistory(1, residual_storage="cpu")
    history.append(0, torch.zeros(3, dtype=torch.bfloat16))
    history.append(1, torch.ones(3, dtype=torch.bfloat16))
    assert all(r.device.type == "cpu" and r.dtype == torch.bfloat16 for _, r in history.records)
    got = history.predict(2, "cpu", torch.float64)
    assert got.dtype == torch.float64 and torch.equal(got, torch.full((3,), 2.0, dtype=torch.float64))


@pytest.mark.parametrize("order", [0, 1, 2])
def test_cpu_storage_reuses_its_buffers_and_matches_compute_storage_bit_for_bit(order):
    gen = torch.Generator().manual_seed(order)
    residuals = [torch.randn(2, 5, 7, generator=gen).bfloat16() for _ in range(12)]
    offloaded, kept = ResidualHistory(order, residual_storage="cpu"), ResidualHistory(order)
    steps = [0, 1, 2, 2, 3, 5, 6, 7, 8, 9, 10, 11]  # a repeated step (replaced) and a gap
    # allocated once, then reused for the rest of the run
    assert offload_against_kept(offloaded, kept, steps, residuals, ahead=(1, 2)) == order + 1
    with counting_host_buffers() as allocated:
        offloaded.append(12, torch.zeros(3, 5, 7, dtype=torch.bfloat16))  # another shape: a fresh buffer
    assert allocated[offloaded] == 1 and len(offloaded) == 1


def test_order_one_follows_its_line_one_spacing_past_the_last_record_and_holds_it():
    history = ResidualHistory(1)
    history.append(3, torch.full((2,), 1.0))
    history.append(4, torch.full((2,), 2.0))  # records one step apart: the line reaches to step 5
    assert [history.predict(at, "cpu", torch.float32)[0].item() for at in (5, 6, 8)] == [3.0, 3.0, 3.0]
    history.append(8, torch.full((2,), 6.0))  # now four apart: followed up to step 12
    assert [history.predict(at, "cpu", torch.float32)[0].item() for at in (9, 12, 13)] == [7.0, 10.0, 10.0]
    parabola = ResidualHistory(2)  # order 2 extrapolates as far as asked
    for step in (3, 4, 5):
        parabola.append(step, torch.full((2,), float(step * step)))
    assert parabola.predict(9, "cpu", torch.float32)[0].item() == 81.0


def test_schedule_shift_reads_the_shift_of_a_shifted_schedule():
    from cosmos3 import reference_sigmas
    from seacache_core.extrapolate import schedule_shift

    for shift in (1.0, 3.0, 5.0, 10.0):
        for steps in (10, 35, 50):
            assert schedule_shift([float(s) for s in reference_sigmas(steps, shift)]) == pytest.approx(shift, rel=0.01)
    assert schedule_shift([1.0]) == 1.0  # no step: no shift to read


def test_quadratic_weight_is_half_up_to_shift_three_and_whole_from_shift_five():
    from cosmos3 import reference_sigmas
    from seacache_core.extrapolate import quadratic_weight

    weight = lambda shift: quadratic_weight([float(s) for s in reference_sigmas(35, shift)])  # noqa: E731
    assert weight(1.0) == weight(2.0) == 0.5 and weight(5.0) == weight(10.0) == 1.0
    assert weight(3.0) == pytest.approx(0.5, abs=0.01)
    assert weight(3.0) < weight(3.5) < weight(4.0) < weight(4.5) < 1.0
    assert weight(15 ** 0.5) == pytest.approx(0.75, abs=0.01)  # log-linear: halfway at the geometric middle


def test_order_two_with_a_quadratic_weight_blends_the_held_line_with_the_parabola():
    records = [(3, 9.0), (4, 16.0), (5, 25.0)]  # step squared: the parabola is exact, the line through 4 and 5 is not
    plain, half, none = ResidualHistory(2), ResidualHistory(2, quadratic_weight=0.5), ResidualHistory(2, quadratic_weight=0.0)
    for history in (plain, half, none):
        for step, value in records:
            history.append(step, torch.full((2,), value))
    parabola = plain.predict(9, "cpu", torch.float32)[0].item()
    line = none.predict(9, "cpu", torch.float32)[0].item()  # held one spacing past step 5: 25 + 9
    assert (parabola, line) == (81.0, 34.0)
    assert half.predict(9, "cpu", torch.float32)[0].item() == 0.5 * 81.0 + 0.5 * 34.0
    assert half.predict(8, "cpu", torch.float64).dtype == torch.float64
    for near in (6, 7):  # up to FULL_REACH (2) steps past the last record the parabola is followed whole
        assert torch.equal(half.predict(near, "cpu", torch.float32), plain.predict(near, "cpu", torch.float32))
    weighted = ResidualHistory(2, quadratic_weight=1.0)  # weight 1: the plain order 2, bit for bit
    g = torch.Generator().manual_seed(0)
    for step in (0, 2, 3):
        residual = torch.randn(3, 4, generator=g)
        weighted.append(step, residual)
        plain.append(step, residual)
    assert torch.equal(weighted.predict(6, "cpu", torch.float32), plain.predict(6, "cpu", torch.float32))


def test_history_predict_never_returns_a_stored_tensor():
    history = ResidualHistory(0)
    history.append(0, torch.ones(3))
    got = history.predict(1, "cpu", torch.float32)
    got.mul_(5)
    assert torch.equal(history.records[0][1], torch.ones(3))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_history_cpu_offload_is_pinned_and_waits_on_the_device_only():
    history = ResidualHistory(1, residual_storage="cpu")
    residuals = [torch.randn(2, 4096, 512, device="cuda", dtype=torch.bfloat16) for _ in range(6)]
    with counting_host_buffers() as allocated:
        history.append(0, residuals[0])
        history.append(1, residuals[1])
        with sync_debug("error"):  # any host wait raises
            for step in range(2, 6):
                predicted = history.predict(step, torch.device("cuda"), torch.bfloat16)
                history.append(step, residuals[step])
    assert all(r.is_pinned() for _, r in history.records) and allocated[history] == 2
    expected = ResidualHistory(1)
    for step in range(5):
        expected.append(step, residuals[step])
    assert torch.equal(predicted, expected.predict(5, torch.device("cuda"), torch.bfloat16))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_history_cpu_offload_from_cuda():
    history = ResidualHistory(1, residual_storage="cpu")
    history.append(0, torch.zeros(3, device="cuda"))
    history.append(1, torch.ones(3, device="cuda"))
    assert all(r.device.type == "cpu" for _, r in history.records)
    got = history.predict(2, torch.device("cuda"), torch.float16)
    assert got.device.type == "cuda" and got.dtype == torch.float16
    assert torch.equal(got.cpu(), torch.full((3,), 2.0, dtype=torch.float16))
