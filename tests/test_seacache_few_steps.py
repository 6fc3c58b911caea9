"""Runs of few steps: below ``min_steps`` (default 8) a run reuses nothing, the speed controller included; runs of 8
steps and more decide as with no floor; a run that reuses nothing says why in one line of its summary (what SeaCache
Stats shows): too few steps, the schedule's ends left no step free, or what made each free step compute."""

import dataclasses

import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.seacache_host import run_stack

OFF = SeaCacheConfig(min_steps=0)  # the defaults without the few-steps floor


def run_over(config: SeaCacheConfig, sigmas: list[float], change: float, reuse_steps=None) -> SeaCacheRun:
    """A run of a fake stack over ``sigmas`` on latents that change by ``change`` (relative) per step."""
    run = SeaCacheRun(config, sigmas, reuse_steps)
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(1, 4, 3, 8, 8, generator=generator)
    for step, sigma in enumerate(sigmas[:-1]):
        latent = base + change * step * torch.randn(base.shape, generator=generator)
        run_stack(run, lambda h: h * 2.0 + 1.0, torch.ones(1, 4, 8) * (1.0 - sigma), latent, sigma, ["cond"])
    return run


def reasons_line(run: SeaCacheRun) -> str:
    lines = [line for line in run.stats.summary().splitlines() if line.startswith("reused nothing")]
    assert len(lines) <= 1
    return lines[0] if lines else ""


def test_a_schedule_without_a_free_step_says_so():
    run = run_over(OFF, [1.0, 0.5, 0.0], change=0.0)
    assert [r.reason for r in run.stats.records] == ["warmup", "end"]
    assert reasons_line(run) == "reused nothing: 2 steps leave no step between the warm-up and the final steps"
    wider = run_over(dataclasses.replace(OFF, warmup_steps=2, end_steps=2), [1.0, 0.9375, 0.8333, 0.625, 0.0], change=0.0)
    assert reasons_line(wider) == "reused nothing: 4 steps leave no step between the warm-up and the final steps"
    no_warmup = run_over(dataclasses.replace(OFF, warmup_steps=0), [1.0, 0.5, 0.0], change=0.0)  # step 0: no history
    assert [r.reason for r in no_warmup.stats.records] == ["no_history", "end"]
    assert reasons_line(no_warmup) == "reused nothing: 2 steps leave no step between the warm-up and the final steps"


def test_free_steps_that_reached_the_threshold_are_counted():
    four = run_over(OFF, [1.0, 0.9375, 0.8333, 0.625, 0.0], change=1.0)
    assert [r.decision for r in four.stats.records] == ["forced", "computed", "computed", "forced"]
    assert reasons_line(four) == ("reused nothing: both steps free to reuse reached the threshold (a higher threshold "
                                  "reuses more)")
    windowed = run_over(OFF, [1.0, 0.9, 0.8, 0.7, 0.0], change=1.0, reuse_steps=range(1, 2))
    assert reasons_line(windowed) == ("reused nothing: of the 2 steps free to reuse, 1 reached the threshold (a higher "
                                   "threshold reuses more), 1 lay outside the reuse window (start_percent / "
                                   "end_percent)")
    assert reasons_line(run_over(dataclasses.replace(OFF, threshold=0.0), [1.0, 0.9, 0.8, 0.7, 0.0], change=0.0)) == (
        "reused nothing: both steps free to reuse reached the threshold (a higher threshold reuses more)")


def test_a_run_that_reused_has_no_such_line():
    run = run_over(OFF, [1.0, 0.9375, 0.8333, 0.625, 0.0], change=0.0)
    assert run.stats.reused > 0 and reasons_line(run) == ""
    assert run.report("completed")["summary"] == run.stats.summary()


def even(steps: int) -> list[float]:
    """``steps`` evenly spaced sigmas from 1, and the final 0."""
    return [1.0 - i / steps for i in range(steps)] + [0.0]


def decisions(run: SeaCacheRun) -> list[tuple[str, str | None]]:
    return [(r.decision, r.reason) for r in run.stats.records]


@pytest.mark.parametrize("speedup", [0.0, 2.0])
def test_fewer_steps_than_min_steps_reuse_nothing_and_say_so(speedup, caplog):
    config = SeaCacheConfig(speedup=speedup)
    run = run_over(config, even(7), change=0.01)
    assert decisions(run) == [("forced", "few_steps")] * 7 and run.reuse_cap == 2
    assert reasons_line(run) == ("reused nothing: 7 steps are fewer than min_steps 8 (few-step runs lose more than "
                                 "they gain; lower min_steps to reuse)")
    assert run.report("completed")["nothing_reused"] == reasons_line(run).removeprefix("reused nothing: ")
    floor_off = run_over(dataclasses.replace(config, min_steps=0), even(7), change=0.01)  # as before min_steps
    assert floor_off.stats.reused == (4 if speedup == 0 else 3) and reasons_line(floor_off) == ""
    if speedup:  # the controller replays the rule: the target is out of reach, and the cap stays
        assert "reached 1.00x (out of reach: min_steps, warmup, end" in run.report("completed")["summary"]
        assert "lifted" not in run.report("completed")["summary"]
        assert sum("out of reach" in r.message for r in caplog.records) == 1


@pytest.mark.parametrize("speedup", [0.0, 2.0])
@pytest.mark.parametrize("steps", [8, 12])
def test_runs_of_min_steps_and_more_decide_as_with_no_floor(steps, speedup):
    config = SeaCacheConfig(speedup=speedup)
    run = run_over(config, even(steps), change=0.01)
    floor_off = run_over(dataclasses.replace(config, min_steps=0), even(steps), change=0.01)
    assert decisions(run) == decisions(floor_off) and run.stats.reused >= 4
    assert run.report("completed")["summary"] == floor_off.report("completed")["summary"]


def test_min_steps_is_the_schedules_length_against_the_floor():
    assert run_over(SeaCacheConfig(min_steps=4), even(4), change=0.01).stats.reused == 2
    assert decisions(run_over(SeaCacheConfig(min_steps=5), even(4), change=0.01)) == [("forced", "few_steps")] * 4
