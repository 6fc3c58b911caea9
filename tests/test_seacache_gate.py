"""SeaCacheRun: decisions, prediction, bookkeeping (docs/algorithm.md §5-7, §9)."""

import json

import pytest
import torch

from seacache_core import ResidualHistory, SeaCacheConfig, SeaCacheRun, item_distances, sea_filter_float32
from seacache_testing.allocation_counters import CountingGainCache

SHAPE = (1, 3, 4, 6, 8)


def _noise(shape=SHAPE, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _sigmas(n):
    """A slice of a schedule with small sigma steps, so the latent drift dominates the distance."""
    return torch.linspace(0.6, 0.5, n).tolist()


def rel_l1(current, previous) -> float:
    """The gate's distance of two single-item tensors."""
    return float(item_distances(current, previous))


def _new(config, n, reuse_steps=None):
    """A run over ``n`` steps of ``_sigmas(n)`` (plus the final sigma 0)."""
    return SeaCacheRun(config, [*_sigmas(n), 0.0], reuse_steps)


def _call(run, keys, latent, sigma, residual=None, filter_sigma=None):
    """One gated call as a host makes it; returns the call and whether the prediction was applied."""
    residual = torch.randn(len(keys), 5) if residual is None else residual
    call = run.decide(latent, sigma, keys, filter_sigma)
    if run.predict(call, residual) is not None:
        return call, True
    run.commit(call, residual)
    return call, False


def _drifting(n, scale=0.01, seed=0):
    """Latents that change a little from step to step."""
    base, drift = _noise(seed=seed), _noise(seed=seed + 100)
    return [base + scale * i * drift for i in range(n)]


def _run(config, latents, keys=("c",), filter_sigma=None):
    """A run over the latents, one call per step; ``filter_sigma`` filters every step at that one sigma."""
    n = len(latents)
    run = _new(config, n)
    for latent, sigma in zip(latents, _sigmas(n)):
        _call(run, list(keys), latent, sigma, filter_sigma=filter_sigma)
    return run


def _letters(run):
    return "".join({"forced": "F", "computed": "C", "reused": "R"}[r.decision] for r in run.stats.records)


def test_threshold_zero_never_reuses():
    latents = [_noise()] * 12  # identical latents at one sigma: distance 0
    gate = _run(SeaCacheConfig(gate="sea", threshold=0.0, max_consecutive=-1), latents, filter_sigma=0.5)
    assert gate.stats.reused == 0 and gate.stats.ran == 12
    assert [r.reason for r in gate.stats.records[1:-1]] == ["threshold"] * 10
    assert all(r.distance == 0.0 for r in gate.stats.records[1:])


def test_first_and_last_steps_always_computed():
    gate = _run(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1, warmup_steps=2, end_steps=3), _drifting(12))
    reasons = [(r.decision, r.reason) for r in gate.stats.records]
    assert reasons[:2] == [("forced", "warmup")] * 2
    assert reasons[-3:] == [("forced", "end")] * 3
    assert _letters(gate) == "FF" + "R" * 7 + "FFF"


def test_equality_at_threshold_computes():
    # At one sigma, halving the latent halves its indicator exactly: every step has distance exactly 0.5.
    latents = [_noise() / 2**k for k in range(6)]
    gate = _run(SeaCacheConfig(gate="sea", threshold=1.0, max_consecutive=-1, min_steps=0), latents, filter_sigma=0.5)
    recs = gate.stats.records
    assert [r.distance for r in recs[1:]] == [0.5] * 5
    assert [r.accumulated for r in recs[1:5]] == [0.5, 1.0, 0.5, 1.0]
    assert [(r.decision, r.reason) for r in recs[1:5]] == [
        ("reused", None), ("computed", "threshold"), ("reused", None), ("computed", "threshold")]
    above = _run(SeaCacheConfig(gate="sea", threshold=1.0 + 1e-9, max_consecutive=-1, min_steps=0),
                 latents, filter_sigma=0.5)
    assert _letters(above) == "FRRCRF"  # 1.0 < 1.0 + 1e-9: step 2 reuses, step 3 reaches 1.5


@pytest.mark.parametrize("cap", [1, 2, 3])
def test_consecutive_reuses_never_exceed_cap(cap):
    gate = _run(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=cap), _drifting(20))
    runs = [len(run) for run in _letters(gate).replace("F", " ").replace("C", " ").split()]
    assert max(runs) == cap
    assert all(r.reason == "max_consecutive" for r in gate.stats.records[1:-1] if r.decision != "reused")


def test_no_cap_and_zero_cap():
    assert _letters(_run(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1), _drifting(12))) == "F" + "R" * 10 + "F"
    never = _run(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=0), _drifting(12))
    assert never.stats.reused == 0
    assert {r.reason for r in never.stats.records[1:-1]} == {"max_consecutive"}


def test_accumulates_distance_and_resets_on_compute():
    latents = _drifting(10, scale=0.05)
    gate = _run(SeaCacheConfig(gate="sea", threshold=0.3, max_consecutive=-1), latents)
    sig = _sigmas(10)
    acc = 0.0
    for step, rec in enumerate(gate.stats.records[1:-1], start=1):
        d = rel_l1(sea_filter_float32(latents[step], sig[step]), sea_filter_float32(latents[step - 1], sig[step - 1]))
        assert rec.distance == pytest.approx(d, rel=1e-5)
        acc += d
        assert rec.accumulated == pytest.approx(acc, rel=1e-5)
        assert rec.decision == ("reused" if acc < 0.3 else "computed")
        if rec.decision == "computed":
            acc = 0.0
    assert 0 < gate.stats.reused < 8


def test_stats_counts_speedup_and_serialisation():
    gate = _run(SeaCacheConfig(gate="sea", threshold=1e9), _drifting(11))
    s = gate.stats
    assert s.calls == 11 and s.ran + s.reused == s.calls
    assert (s.ran, s.reused) == (5, 6)  # F R R F R R F R R F F
    assert s.speedup == pytest.approx(11 / 5)
    d = json.loads(json.dumps(s.to_dict(), allow_nan=False))
    assert d["calls"] == 11 and len(d["records"]) == 11 and d["records"][1]["decision"] == "reused"
    assert d["records"][1]["branches"]["c"]["reason"] is None
    text = s.summary()
    assert "11 calls, 5 ran the stack, 6 reused" in text and "2.20x" in text
    assert text.splitlines()[-1].endswith("F R R F R R F R R F F")


def test_branches_batched_equal_separate_calls():
    """cond and uncond gated in one batched call keep the same per-branch states as in separate calls."""
    n = 10
    cond, uncond = _drifting(n, 0.02, seed=1), _drifting(n, 0.05, seed=2)
    config = SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=2)
    batched, separate = _new(config, n), _new(config, n)
    for step, sigma in enumerate(_sigmas(n)):
        res = torch.randn(2, 5)
        db, _ = _call(batched, ["c", "u"], torch.cat([cond[step], uncond[step]]), sigma, res)
        dc, _ = _call(separate, ["c"], cond[step], sigma, res[:1])
        du, _ = _call(separate, ["u"], uncond[step], sigma, res[1:])
        assert db.reuse == dc.reuse == du.reuse
        for key in ("c", "u"):
            a, b = batched.states[key], separate.states[key]
            assert (a.consecutive, a.last_step) == (b.consecutive, b.last_step)
            assert a.accumulated == pytest.approx(b.accumulated, rel=1e-6, abs=1e-9)
            torch.testing.assert_close(a.indicator, b.indicator)
            assert [s for s, _ in a.history.records] == [s for s, _ in b.history.records]
            for (_, ra), (_, rb) in zip(a.history.records, b.history.records):
                assert torch.equal(ra, rb)
        if step > 0:
            rb, rc, ru = batched.stats.records[-1], separate.stats.records[-2], separate.stats.records[-1]
            assert rb.branches["c"]["distance"] == pytest.approx(rc.distance, rel=1e-5)
            assert rb.branches["u"]["distance"] == pytest.approx(ru.distance, rel=1e-5)
            assert rb.distance == pytest.approx(max(rc.distance, ru.distance), rel=1e-5)
            assert rc.distance != pytest.approx(ru.distance, rel=1e-2)
    assert batched.stats.calls == n and separate.stats.calls == 2 * n
    assert batched.stats.reused * 2 == separate.stats.reused > 0


def test_one_branch_must_compute_whole_call_computes():
    n = 8
    still = _noise(seed=3)
    jumping = [_noise(seed=4) / 2**k for k in range(n)]  # distance 0.5 every step
    gate = _new(SeaCacheConfig(gate="sea", threshold=0.3, max_consecutive=-1, order=1), n)
    for step in range(3):
        d, applied = _call(gate, ["c", "u"], torch.cat([still, jumping[step]]), _sigmas(n)[step], filter_sigma=0.5)
    rec = gate.stats.records[-1]
    assert not applied and rec.decision == "computed" and rec.reason == "threshold"
    assert rec.branches["c"]["reason"] is None and rec.branches["c"]["distance"] == 0.0
    assert rec.branches["u"]["reason"] == "threshold" and rec.distance == 0.5
    assert gate.states["c"].accumulated == 0.0 and gate.states["c"].consecutive == 0
    assert [s for s, _ in gate.states["c"].history.records] == [1, 2]
    # A branch seen for the first time forces the whole call even though "c" alone would reuse.
    d, applied = _call(gate, ["c", "new"], torch.cat([still, still]), _sigmas(n)[3], filter_sigma=0.5)
    assert not applied and d.reason == "no_history"
    assert gate.stats.records[-1].decision == "forced"


def test_branches_with_different_inputs_reuse_together_from_their_own_aligned_histories():
    """Guidance branches whose inputs differ, batched in one call (NVIDIA cosmos-framework #262: control CFG's
    full-control, no-control and negative branches see different vision inputs): the call reuses only when every
    branch may, each branch predicts from its own history, and every branch's history is refreshed on the same
    steps, so the guidance never mixes a reused branch with a computed one."""
    n, keys = 14, ["full_control", "no_control", "negative"]
    trajectories = [_drifting(n, scale, seed) for scale, seed in ((0.01, 1), (0.03, 2), (0.002, 3))]
    run = _new(SeaCacheConfig(gate="sea", threshold=0.05, max_consecutive=-1, order=0), n)
    overruled, computed = 0, None
    for step, sigma in enumerate(_sigmas(n)):
        residual = torch.tensor([[1.0], [2.0], [3.0]]) * step  # each branch's own residual
        verdict = run.decide(torch.cat([t[step] for t in trajectories]), sigma, keys, filter_sigma=0.5)
        reasons = [plan.reason for plan in verdict.branches]
        assert verdict.reuse == all(reason is None for reason in reasons)
        overruled += not verdict.reuse and None in reasons  # a branch that alone would reuse computes with the others
        predicted = run.predict(verdict, residual)
        if verdict.reuse:  # order 0: each branch's residual of the last computed step, in item order
            assert torch.equal(predicted, torch.tensor([[1.0], [2.0], [3.0]]) * computed)
        else:
            run.commit(verdict, residual)
            computed = step
        refreshed = [[s for s, _ in run.states[key].history.records] for key in keys]
        assert refreshed[0] == refreshed[1] == refreshed[2]
    assert run.stats.reused > 0 and overruled > 0


def test_reuse_window_forces_compute():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1, min_steps=0), 6, reuse_steps=range(2, 6))
    latents, sig = _drifting(6), _sigmas(6)
    _call(gate, ["c"], latents[0], sig[0])
    d, applied = _call(gate, ["c"], latents[1], sig[1])
    assert not applied and d.reason == "window" and gate.stats.records[-1].decision == "forced"
    d, applied = _call(gate, ["c"], latents[2], sig[2])
    assert applied


def test_predict_order0_returns_branch_residuals_in_item_order():
    gate = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=1e9, order=0, min_steps=0), [0.9, 0.8, 0.7, 0.6, 0.5, 0.0])
    lat = torch.cat([_noise(seed=1), _noise(seed=2), _noise(seed=1)])
    keys = ["c", "u", "c"]
    res = torch.arange(3 * 4, dtype=torch.float32).reshape(3, 4)
    gate.commit(gate.decide(lat, 0.9, keys), res)
    d = gate.decide(lat, 0.8, keys)
    assert d.reuse
    pred = gate.predict(d, torch.zeros(3, 4, dtype=torch.float64))  # commits the reuse
    assert pred.dtype == torch.float64 and torch.equal(pred, res.double())
    assert gate.stats.records[-1].decision == "reused"


def test_prediction_extrapolates_recorded_residuals():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, order=1, max_consecutive=-1), 8, reuse_steps=range(2, 3))
    lat, sig = _drifting(8), _sigmas(8)
    base, slope = torch.randn(1, 6), torch.randn(1, 6)
    for step in range(3):
        d = gate.decide(lat[step], sig[step], ["c"])
        if d.reuse:
            torch.testing.assert_close(gate.predict(d, torch.zeros(1, 6)), base + 2 * slope)
        else:
            gate.commit(d, base + step * slope)
    assert [r.decision for r in gate.stats.records] == ["forced", "forced", "reused"]


def test_prediction_fallback_counts_as_computed():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, min_steps=0), 5)
    lat, sig = _drifting(5), _sigmas(5)
    gate.commit(gate.decide(lat[0], sig[0], ["c"]), torch.zeros(1, 4))
    d = gate.decide(lat[1], sig[1], ["c"])
    assert d.reuse and gate.predict(d, torch.zeros(1, 7)) is None  # stack shape changed
    gate.commit(d, torch.ones(1, 7))
    rec = gate.stats.records[-1]
    assert (rec.decision, rec.reason) == ("computed", "fallback")
    assert gate.stats.reused == 0 and gate.stats.ran == 2
    state = gate.states["c"]
    assert state.consecutive == 0 and state.accumulated == 0.0 and [s for s, _ in state.history.records] == [1]


def _snapshot(state):
    return (state.accumulated, state.consecutive, state.last_step, state.last_sigma, id(state.indicator),
            [(s, id(r)) for s, r in state.history.records])


def test_off_schedule_and_repeat_are_computed_and_reported():
    """Off-schedule evaluations leave the state untouched; a repeat at the same step (Heun's step evaluation
    after its corrector) computes and refreshes only that step's indicator and residual record."""
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1), 8)
    lat, sig = _drifting(8), _sigmas(8)
    for step in range(3):
        _call(gate, ["c"], lat[step], sig[step])
    before = _snapshot(gate.states["c"])
    assert gate.states["c"].consecutive == 2
    d, applied = _call(gate, ["c"], lat[3], 0.5 * (sig[2] + sig[3]))
    assert not applied and (d.reuse, d.reason) == (False, "off_schedule")
    assert _snapshot(gate.states["c"]) == before
    d, applied = _call(gate, ["c"], lat[3], sig[2])
    assert not applied and (d.reuse, d.reason) == (False, "repeat")
    state = gate.states["c"]
    assert (state.accumulated, state.consecutive, state.last_step, state.last_sigma) == before[:4]
    assert [s for s, _ in state.history.records] == [0, 2]  # the real residual of step 2 joins the history
    assert torch.allclose(state.indicator, sea_filter_float32(lat[3], sig[2], 3.0))
    assert [(r.step, r.decision, r.reason) for r in gate.stats.records[-2:]] == [
        (None, "forced", "off_schedule"), (2, "forced", "repeat")]
    d, applied = _call(gate, ["c"], lat[3], sig[3])  # the run continues, comparing with the repeat
    assert applied and gate.states["c"].consecutive == 3
    expected = rel_l1(sea_filter_float32(lat[3], sig[3], 3.0), sea_filter_float32(lat[3], sig[2], 3.0))
    assert d.distance == pytest.approx(expected, rel=1e-4)  # measured against the repeat, not step 2's first call
    assert gate.stats.calls == 6 and gate.stats.ran == 3


def test_a_second_residual_for_the_newest_step_replaces_it():
    history = ResidualHistory(order=1)
    history.append(0, torch.zeros(2))
    history.append(1, torch.ones(2))
    history.append(1, torch.full((2,), 3.0))
    assert [(s, r.tolist()) for s, r in history.records] == [(0, [0.0, 0.0]), (1, [3.0, 3.0])]


def test_reset_on_non_adjacent_step():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1), 10)
    lat, sig = _drifting(10), _sigmas(10)
    for step in range(3):
        _call(gate, ["c"], lat[step], sig[step])
    assert gate.states["c"].consecutive == 2 and len(gate.states["c"].history) == 1
    d, applied = _call(gate, ["c"], lat[5], sig[5])
    assert not applied and d.reason == "reset" and d.distance is None
    state = gate.states["c"]
    assert [s for s, _ in state.history.records] == [5]
    assert (state.accumulated, state.consecutive, state.last_step) == (0.0, 0, 5)
    assert _call(gate, ["c"], lat[6], sig[6])[1]


def test_reset_on_new_run_sigma_going_up():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1), 10)
    lat, sig = _drifting(10), _sigmas(10)
    for step in range(4):
        _call(gate, ["c"], lat[step], sig[step])
    # The schedule starts again (sigma went up): a new run drops the history (reported as warmup, which takes
    # precedence over reset at step 0).
    d, _ = _call(gate, ["c"], lat[0], sig[0])
    assert d.reason == "warmup" and [s for s, _ in gate.states["c"].history.records] == [0]
    no_warmup = _new(SeaCacheConfig(gate="sea", threshold=1e9, warmup_steps=0, max_consecutive=-1), 10)
    for step in range(3):
        _call(no_warmup, ["c"], lat[step], sig[step])
    d, _ = _call(no_warmup, ["c"], lat[0], sig[0])
    assert d.reason == "reset" and [s for s, _ in no_warmup.states["c"].history.records] == [0]


def test_latent_change_gives_infinite_distance():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, max_consecutive=-1, min_steps=0), 6)
    sig = _sigmas(6)
    _call(gate, ["c"], _noise(), sig[0])
    _call(gate, ["c"], _noise(), sig[1])
    d, applied = _call(gate, ["c"], _noise().bfloat16(), sig[2])
    assert not applied and d.distance == float("inf") and d.reason == "threshold"
    d, applied = _call(gate, ["c"], _noise((1, 3, 4, 6, 10)), sig[3])
    assert not applied and d.distance == float("inf")
    assert json.dumps(gate.stats.to_dict(), allow_nan=False)


def test_cpu_residual_storage():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, residual_storage="cpu", order=2), 6)
    lat, sig = _drifting(6), _sigmas(6)
    for step in range(4):
        _call(gate, ["c"], lat[step], sig[step], torch.randn(1, 5, dtype=torch.bfloat16))
    records = gate.states["c"].history.records
    assert 1 <= len(records) <= 3
    assert all(r.device.type == "cpu" and r.dtype == torch.bfloat16 for _, r in records)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_residual_storage_offloads_cuda():
    gate = _new(SeaCacheConfig(gate="sea", threshold=1e9, residual_storage="cpu"), 6)
    lat, sig = [x.cuda() for x in _drifting(6)], _sigmas(6)
    gate.commit(gate.decide(lat[0], sig[0], ["c"]), torch.ones(1, 5, device="cuda"))
    assert gate.states["c"].history.records[0][1].device.type == "cpu"
    pred = gate.predict(gate.decide(lat[1], sig[1], ["c"]), torch.zeros(1, 5, device="cuda", dtype=torch.bfloat16))
    assert pred.device.type == "cuda" and pred.dtype == torch.bfloat16
    assert torch.equal(pred.float().cpu(), torch.ones(1, 5))


def test_history_never_exceeds_order_plus_one():
    for order in (0, 1, 2):
        gate = _new(SeaCacheConfig(gate="sea", threshold=0.0, order=order), 8)
        lat, sig = _drifting(8), _sigmas(8)
        for step in range(8):
            _call(gate, ["c"], lat[step], sig[step])
            assert len(gate.states["c"].history) == min(step + 1, order + 1)


def test_gain_built_once_per_step_whatever_the_batch():
    n = 6
    lat, sig = _drifting(n), _sigmas(n)
    batched, separate = _new(SeaCacheConfig(threshold=0.25, gate="sea"), n), _new(SeaCacheConfig(threshold=0.25, gate="sea"), n)
    batched.gains, separate.gains = CountingGainCache(), CountingGainCache()
    for step in range(n):
        _call(batched, ["c", "u"], torch.cat([lat[step], 2 * lat[step]]), sig[step])
        _call(separate, ["c"], lat[step], sig[step])
        _call(separate, ["u"], 2 * lat[step], sig[step])
    assert batched.gains.builds == n and separate.gains.builds == n


def test_api_misuse_raises():
    gate = _new(SeaCacheConfig(threshold=0.25, gate="sea"), 4)
    lat = _noise()
    with pytest.raises(ValueError, match="keys"):
        gate.decide(lat, 0.6, ["c", "u"])
    with pytest.raises(ValueError, match="latent must be"):
        gate.decide(lat.flatten(2), 0.6, ["c"])
    d = gate.decide(lat, 0.6, ["c"])
    assert gate.predict(d, torch.zeros(1, 3)) is None  # no reuse decision: the call computes
    with pytest.raises(ValueError, match="residual"):
        gate.commit(d, None)
    with pytest.raises(ValueError, match="batch"):
        gate.commit(d, torch.zeros(2, 3))
    gate.commit(d, torch.zeros(1, 3))
    with pytest.raises(RuntimeError, match="committed already"):
        gate.commit(d, torch.zeros(1, 3))
    assert gate.stats.calls == 1


def test_release_frees_the_state_and_keeps_the_statistics():
    gate = _run(SeaCacheConfig(gate="sea", threshold=1e9), _drifting(5))
    assert gate.states["c"].indicator is not None and len(gate.gains._gains) > 0
    gate.release()
    assert gate.states == {} and len(gate.gains._gains) == 0 and gate.stats.calls == 5
    report = gate.report("completed")
    assert (report["status"], report["calls"], report["steps"], report["threshold"]) == ("completed", 5, 5, 1e9)


def test_entry_points_are_not_traced_by_torch_compile():
    from seacache_core import Call

    for method in (SeaCacheRun.decide, SeaCacheRun.follow, Call.enter, Call.leave, SeaCacheRun.predict, SeaCacheRun.commit):
        assert getattr(method, "_torchdynamo_disable", False)
    gate = _new(SeaCacheConfig(threshold=0.25, gate="sea", min_steps=0), 4)
    lat = _noise()

    @torch.compile(backend="eager")
    def model_call(x):
        gate.commit(gate.decide(x, 0.6, ["c"]), x.flatten(1) * 2)
        return x + 1

    torch.testing.assert_close(model_call(lat), lat + 1)
    assert gate.stats.calls == 1 and gate.stats.records[0].reason == "warmup"
    torch.testing.assert_close(gate.states["c"].indicator, sea_filter_float32(lat, 0.6))


@pytest.mark.parametrize("gate_name", ["sea", "sea_same_sigma"])
def test_joint_gate_reads_the_sound_latent(gate_name):
    """With a sound latent the distance is the weighted mean of the video's and the sound's (filtered along time,
    dim 2, at the current sigma); with sound_weight 0, or without a sound latent, it is the video's alone."""
    video = [_noise(), _noise() + 0.1 * _noise(seed=1)]
    sound = [_noise((1, 4, 9, 2), seed=2), _noise((1, 4, 9, 2), seed=2) + 0.5 * _noise((1, 4, 9, 2), seed=3)]
    sigmas = _sigmas(2)

    def distance(weight, with_sound):
        gate = SeaCacheRun(SeaCacheConfig(threshold=100.0, gate=gate_name, sound_weight=weight), [*sigmas, 0.4, 0.3, 0.0])
        for step in range(2):
            decision = gate.decide(video[step], sigmas[step], ["c"], sound=sound[step] if with_sound else None)
            gate.commit(decision, torch.zeros(1, 1))
        return decision.distance

    video_only = distance(1.0, False)
    assert distance(0.0, True) == pytest.approx(video_only, rel=1e-6)
    filtered = [sea_filter_float32(s, sigmas[1], 1.0, (2,)) for s in sound]
    sound_distance = rel_l1(filtered[1], filtered[0])
    for weight in (1.0, 3.0):
        assert distance(weight, True) == pytest.approx((video_only + weight * sound_distance) / (1 + weight), rel=1e-5)
    assert sound_distance > 2 * video_only  # the sound changed more: the joint gate sees it


def test_joint_gate_computes_when_the_sound_changes_shape():
    gate = _new(SeaCacheConfig(threshold=100.0), 4)
    for step, frames in enumerate((9, 10)):
        decision = gate.decide(_noise(), _sigmas(4)[step], ["c"], sound=_noise((1, 4, frames)))
        gate.commit(decision, torch.zeros(1, 1))
    assert decision.distance == float("inf") and not decision.reuse


def test_a_follower_reuses_its_own_history_exactly_when_its_leader_reused():
    """``follow``: a guidance pass reuses from its own residuals at the steps its leader reused (and has a history),
    computes and commits its residual otherwise; an unknown leader leaves it untouched; no statistics record."""
    n = 12
    sigmas = _sigmas(n)
    gate = _new(SeaCacheConfig(gate="sea", threshold=0.05, max_consecutive=2), n)
    own, pattern = ResidualHistory(gate.config.order), ""  # the follower's residuals, kept apart
    for step, (latent, sigma) in enumerate(zip(_drifting(n), sigmas)):
        _, leader_reused = _call(gate, ["c"], latent, sigma)
        residual = torch.full((1, 5), float(step))
        decision = gate.follow(["c+g0"], ["c"], sigma)
        predicted = gate.predict(decision, residual)
        if predicted is None:
            gate.commit(decision, residual)
        assert decision.reuse == leader_reused and decision.follows
        if predicted is not None:  # extrapolated from the follower's own residuals, not the leader's
            assert torch.equal(predicted, own.predict(step, residual.device, residual.dtype))
        else:
            own.append(step, residual)
        pattern += "R" if leader_reused else "C"
    assert "R" in pattern and "C" in pattern
    assert gate.stats.calls == n and _letters(gate).replace("F", "C") == pattern  # the leader's records only
    assert gate.states["c+g0"].last_step == n - 1
    orphan = gate.follow(["u+g0"], ["u"], sigmas[3])
    assert (orphan.reuse, orphan.reason) == (False, "no_leader")
    gate.commit(orphan, torch.zeros(1, 5))
    assert "u+g0" not in gate.states


def test_threshold_zero_leaves_every_follower_computing():
    n = 8
    gate = _new(SeaCacheConfig(gate="sea", threshold=0.0), n)
    for latent, sigma in zip(_drifting(n), _sigmas(n)):
        _call(gate, ["c", "u"], torch.cat([latent, latent]), sigma)
        decision = gate.follow(["c+g0"], ["c"], sigma)
        assert not decision.reuse
        gate.commit(decision, torch.randn(1, 5))
