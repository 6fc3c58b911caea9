"""The speedup setting: the controller that sets the gate's threshold to reach a target speedup
(seacache_core/speed.py)."""

import dataclasses
import logging
import math

import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.seacache_host import run_stack
from seacache_core.speed import SpeedController

STEPS = 35


def _latents(profile, seed=0):
    """Latents whose step-to-step change follows ``profile`` (one relative size per step)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 3, 4, 8, 8, generator=generator)
    out = [x]
    for size in profile[1:]:
        x = x + size * x.abs().mean() * torch.randn(x.shape, generator=generator)
        out.append(x)
    return out


def _u_profile(steps=STEPS):
    """Large changes first and last, small ones in between (the shape of a shifted flow schedule)."""
    return [0.02 + 0.2 * ((i / (steps - 1)) - 0.45) ** 2 for i in range(steps)]


def _run(config, latents, keys=(("cond", "uncond"),), reuse_steps=None):
    """One run over ``latents`` (one call per entry of ``keys`` per step); returns the run."""
    steps = len(latents)
    run = SeaCacheRun(config, torch.linspace(0.9, 0.05, steps + 1), reuse_steps)
    for latent, sigma in zip(latents, run.sigmas[:steps]):
        for call in keys:
            batch = latent.expand(len(call), -1, -1, -1, -1)
            run_stack(run, lambda h: h * 0.5 + sigma, torch.ones(len(call), 6), batch, sigma, list(call))
    return run


@pytest.mark.parametrize("target", [1.5, 1.8, 2.0, 2.5])
@pytest.mark.parametrize("gate", ["sea", "sea_same_sigma"])
def test_target_is_reached_by_the_end(target, gate):
    run = _run(SeaCacheConfig(gate=gate, speedup=target), _latents(_u_profile()))
    stats = run.stats
    assert stats.calls == STEPS and stats.ran == math.floor(STEPS / target + 0.5)
    assert abs(stats.speedup / target - 1) <= 0.1
    assert "speedup target" in run.report("completed")["summary"]


def test_reuse_spreads_over_the_run_and_keeps_forced_computes():
    run = _run(SeaCacheConfig(speedup=2.0, max_consecutive=2, warmup_steps=2, end_steps=2), _latents(_u_profile()))
    decisions = [r.decision for r in run.stats.records]
    assert decisions[:2] == ["forced"] * 2 and decisions[-2:] == ["forced"] * 2
    assert "reused" * 3 not in "".join(decisions).replace("forced", "c").replace("computed", "c")
    halves = decisions[: STEPS // 2], decisions[STEPS // 2 :]
    assert all(half.count("reused") >= 5 for half in halves)  # not all reuse spent in one half


def test_separate_cond_and_uncond_calls_each_reach_the_target():
    run = _run(SeaCacheConfig(speedup=2.0), _latents(_u_profile()), keys=(("cond",), ("uncond",)))
    stats = run.stats
    assert stats.calls == 2 * STEPS and abs(stats.speedup / 2.0 - 1) <= 0.1


def test_reuse_window_is_respected():
    run = _run(SeaCacheConfig(speedup=1.6), _latents(_u_profile()), reuse_steps=range(11, 29))
    reused = [r.step for r in run.stats.records if r.decision == "reused"]
    assert reused and all(11 <= step < 29 for step in reused)
    assert abs(run.stats.speedup / 1.6 - 1) <= 0.1


def test_decisions_are_deterministic():
    latents = _latents(_u_profile(), seed=3)
    runs = [_run(SeaCacheConfig(speedup=1.8), latents).stats.records for _ in range(2)]
    assert [(r.decision, r.accumulated) for r in runs[0]] == [(r.decision, r.accumulated) for r in runs[1]]


def test_unreachable_target_reuses_what_it_may_and_says_so(caplog):
    # 1 warmup + 1 end + every other step: at most ~1.9x, with the cap kept
    config = SeaCacheConfig(speedup=3.0, max_consecutive=1, speed_lifts_cap=False)
    with caplog.at_level(logging.WARNING, logger="seacache_core.speed"):
        run = _run(config, _latents(_u_profile()))
    best = run.stats.speedup
    assert "".join("R" if r.decision == "reused" else "c" for r in run.stats.records)[1:-1] == "Rc" * 16 + "R"
    assert sum("out of reach" in r.message for r in caplog.records) == 1
    assert f"at most {best:.2f}x" in run.report("completed")["summary"]


def _most_calls(steps, warmup, end, cap):
    """Stack runs of a run whose every free step reuses: warmup and end compute, and in between one step in
    ``cap + 1`` (step 0 computes in any case: no history)."""
    free = steps - warmup - end
    return max(warmup, 1) + end + (0 if cap == -1 else free // (cap + 1))


def _lifted_cap(steps, warmup, end, cap, target):
    """The smallest cap from ``cap`` up whose runs can reach ``target``, -1 if none (by counting, not planning)."""
    for c in [*range(cap, steps + 1), -1]:
        if steps / _most_calls(steps, warmup, end, c) >= target:
            return c
    return -1


@pytest.mark.parametrize("target", [2.0, 2.7, 3.0, 3.5, 4.0, 5.0, 8.0, 30.0])
@pytest.mark.parametrize("warmup, end, cap", [(1, 1, 2), (1, 1, 1), (2, 3, 2), (4, 1, 3)])
def test_the_cap_gives_way_just_as_far_as_the_target_needs(target, warmup, end, cap):
    config = SeaCacheConfig(speedup=target, warmup_steps=warmup, end_steps=end, max_consecutive=cap)
    run = SeaCacheRun(config, torch.linspace(0.9, 0.05, STEPS + 1))
    assert run.reuse_cap == _lifted_cap(STEPS, warmup, end, cap, target)
    kept = SeaCacheRun(dataclasses.replace(config, speed_lifts_cap=False), torch.linspace(0.9, 0.05, STEPS + 1))
    assert kept.reuse_cap == cap


@pytest.mark.parametrize("target, cap", [(3.0, 3), (4.0, 4)])
def test_a_lifted_cap_reaches_three_and_four_times(target, cap, caplog):
    """The default cap of 2 leaves at most 35 / 13 = 2.69x; the run lifts it to the smallest that allows the target,
    reaches the target, reuses at most that many steps in a row, warns of nothing and says what it lifted."""
    with caplog.at_level(logging.WARNING, logger="seacache_core.speed"):
        run = _run(SeaCacheConfig(speedup=target), _latents(_u_profile()))
    assert run.reuse_cap == cap and run.stats.ran == math.floor(STEPS / target + 0.5)
    decisions = "".join("R" if r.decision == "reused" else "c" for r in run.stats.records)
    assert "R" * (cap + 1) not in decisions and "R" * cap in decisions
    forced = [r for r in run.stats.records if r.reason == "max_consecutive"]
    assert all(decisions[r.step - cap : r.step] == "R" * cap for r in forced)
    summary = run.report("completed")["summary"]
    assert f"max_consecutive lifted from 2 to {cap} for this target" in summary and "out of reach" not in summary
    assert not caplog.records


def test_a_reachable_target_keeps_the_cap_and_its_decisions():
    latents = _latents(_u_profile())
    lifting, keeping = (_run(SeaCacheConfig(speedup=2.0, speed_lifts_cap=lifts), latents) for lifts in (True, False))
    assert lifting.reuse_cap == 2 and lifting.speed.lifted_cap is None
    assert [(r.decision, r.accumulated) for r in lifting.stats.records] == \
        [(r.decision, r.accumulated) for r in keeping.stats.records]
    assert "lifted" not in lifting.report("completed")["summary"]


def test_a_target_out_of_reach_without_any_cap_lifts_it_all_and_says_both(caplog):
    config = SeaCacheConfig(speedup=3.0, warmup_steps=20)  # 20 warmup + 1 end of 35 steps: at most 35 / 21 = 1.67x
    with caplog.at_level(logging.WARNING, logger="seacache_core.speed"):
        run = _run(config, _latents(_u_profile()))
    assert run.reuse_cap == -1 and run.stats.ran == 21
    summary = run.report("completed")["summary"]
    assert "max_consecutive lifted from 2 to no cap" in summary and "at most 1.67x" in summary
    assert sum("out of reach" in r.message for r in caplog.records) == 1


def test_a_cap_of_zero_is_never_lifted():
    run = _run(SeaCacheConfig(speedup=3.0, max_consecutive=0), _latents(_u_profile()))
    assert run.reuse_cap == 0 and run.stats.reused == 0


def test_the_reuse_window_counts_in_the_lift():
    """Reuse only in steps 10..29: 15 computes outside, and one in every cap + 1 of the 20 inside; cap 2 allows
    35 / 21 = 1.67x, cap 6 is the first that allows 2x (35 / 17 = 2.06x)."""
    run = _run(SeaCacheConfig(speedup=2.0), _latents(_u_profile()), reuse_steps=range(10, 30))
    assert run.reuse_cap == 6
    assert all(10 <= r.step < 30 for r in run.stats.records if r.decision == "reused")


def test_speedup_off_keeps_the_threshold_rule():
    latents = _latents(_u_profile())
    plain = _run(SeaCacheConfig(threshold=0.3), latents).stats.records
    off = _run(SeaCacheConfig(threshold=0.3, speedup=0.0), latents).stats.records
    assert [r.decision for r in plain] == [r.decision for r in off]
    assert "speedup target" not in _run(SeaCacheConfig(threshold=0.3), latents).report("completed")["summary"]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), 101.0, True])
def test_bad_speedup_is_refused(bad):
    with pytest.raises(ValueError, match="speedup must be a number in 0..100"):
        SeaCacheConfig(speedup=bad)


@pytest.mark.parametrize("off", [0.0, 0.5, 0.95])
def test_a_speedup_below_one_leaves_the_threshold_deciding(off):
    """The node's speedup widget runs from 0 to 5: every value below 1 asks for no speedup, so the threshold decides,
    exactly as with 0 (the default)."""
    latents = _latents(_u_profile())
    plain = _run(SeaCacheConfig(threshold=0.3), latents)
    below = _run(SeaCacheConfig(threshold=0.3, speedup=off), latents)
    assert below.speed is None and SeaCacheConfig(speedup=off).speed_target is None
    assert [(r.decision, r.accumulated) for r in below.stats.records] == [(r.decision, r.accumulated) for r in plain.stats.records]
    assert below.report("completed")["threshold"] == 0.3 and below.report("completed")["speedup_target"] is None


def _two_evaluations_per_step(target, steps=20):
    """A Heun-like run: every step evaluated at its sigma, then again at the next step's (a forced compute)."""
    sigmas = [1 - i / steps for i in range(steps + 1)]
    run = SeaCacheRun(SeaCacheConfig(speedup=target), sigmas)
    generator = torch.Generator().manual_seed(0)
    x0, eps = torch.randn(1, 4, 16, 16, generator=generator), torch.randn(1, 4, 16, 16, generator=generator)
    for i in range(steps):
        for sigma in [sigmas[i]] + ([sigmas[i + 1]] if sigmas[i + 1] > 0 else []):
            latent = (1 - sigma) * x0 + sigma * eps
            run_stack(run, lambda h: h * 0.9 + 0.1, latent.clone(), latent, sigma, ["c"])
    return run


def test_extra_evaluations_per_step_count_in_the_budget(caplog):
    """A reachable target is met with two evaluations per step; one the always-computed second evaluations put out
    of reach is warned about once and named in the report, instead of silently ending far below it."""
    met = _two_evaluations_per_step(1.3)
    assert abs(met.stats.calls / met.stats.ran - 1.3) <= 0.13
    with caplog.at_level(logging.WARNING, logger="seacache_core.speed"):
        short = _two_evaluations_per_step(2.0)
    reached = short.stats.calls / short.stats.ran
    assert reached < 1.9 and sum("out of reach" in r.message for r in caplog.records) == 1
    assert "out of reach: the sampler's extra evaluations" in short.report("completed")["summary"]


def test_points_of_one_step_give_no_slope():
    """Ratios measured at one step only (a restarted schedule reaching it again) predict without a trend."""
    controller = SpeedController(SeaCacheConfig(speedup=2.0), lambda step, consecutive: False)
    controller.set_schedule([1 - i / 10 for i in range(11)])
    for _ in range(3):
        controller.observe(("c",), 3, 0.05, True)
    assert controller.threshold(("c",), 4, 10, 0.01, 0) >= 0.0  # divided by the steps' spread before: ZeroDivisionError


def test_a_speed_run_reports_its_target_and_no_fixed_threshold():
    """Under a target the controller sets the threshold per step: the report carries the target and no threshold,
    so no display draws a threshold line the run never used."""
    report = _run(SeaCacheConfig(speedup=1.8), _latents(_u_profile())).report("completed")
    assert report["threshold"] is None and report["speedup_target"] == 1.8
    assert _run(SeaCacheConfig(threshold=0.2), _latents(_u_profile())).report("completed")["threshold"] == 0.2
