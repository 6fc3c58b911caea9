"""Runs of few steps that reuse nothing say why in one line of their summary (what SeaCache Stats shows): the
schedule's ends left no step free, or what made each free step compute."""

import torch

from seacache_core import SeaCacheConfig, SeaCacheRun


def run_over(config: SeaCacheConfig, sigmas: list[float], change: float, reuse_steps=None) -> SeaCacheRun:
    """A run of a fake stack over ``sigmas`` on latents that change by ``change`` (relative) per step."""
    run = SeaCacheRun(config, sigmas, reuse_steps)
    generator = torch.Generator().manual_seed(0)
    base = torch.randn(1, 4, 3, 8, 8, generator=generator)
    for step, sigma in enumerate(sigmas[:-1]):
        latent = base + change * step * torch.randn(base.shape, generator=generator)
        run.run(lambda h: h * 2.0 + 1.0, torch.ones(1, 4, 8) * (1.0 - sigma), latent, sigma, ["cond"])
    return run


def reasons_line(run: SeaCacheRun) -> str:
    lines = [line for line in run.stats.summary().splitlines() if line.startswith("reused nothing")]
    assert len(lines) <= 1
    return lines[0] if lines else ""


def test_a_schedule_without_a_free_step_says_so():
    run = run_over(SeaCacheConfig(), [1.0, 0.5, 0.0], change=0.0)
    assert [r.reason for r in run.stats.records] == ["warmup", "end"]
    assert reasons_line(run) == "reused nothing: 2 steps leave no step between the warm-up and the final steps"
    wider = run_over(SeaCacheConfig(warmup_steps=2, end_steps=2), [1.0, 0.9375, 0.8333, 0.625, 0.0], change=0.0)
    assert reasons_line(wider) == "reused nothing: 4 steps leave no step between the warm-up and the final steps"
    no_warmup = run_over(SeaCacheConfig(warmup_steps=0), [1.0, 0.5, 0.0], change=0.0)  # step 0: nothing to reuse yet
    assert [r.reason for r in no_warmup.stats.records] == ["no_history", "end"]
    assert reasons_line(no_warmup) == "reused nothing: 2 steps leave no step between the warm-up and the final steps"


def test_free_steps_that_reached_the_threshold_are_counted():
    four = run_over(SeaCacheConfig(), [1.0, 0.9375, 0.8333, 0.625, 0.0], change=1.0)
    assert [r.decision for r in four.stats.records] == ["forced", "computed", "computed", "forced"]
    assert reasons_line(four) == ("reused nothing: both steps free to reuse reached the threshold (a higher threshold "
                                  "reuses more)")
    windowed = run_over(SeaCacheConfig(), [1.0, 0.9, 0.8, 0.7, 0.0], change=1.0, reuse_steps=range(1, 2))
    assert reasons_line(windowed) == ("reused nothing: of the 2 steps free to reuse, 1 reached the threshold (a higher "
                                   "threshold reuses more), 1 lay outside the reuse window (start_percent / "
                                   "end_percent)")
    assert reasons_line(run_over(SeaCacheConfig(threshold=0.0), [1.0, 0.9, 0.8, 0.7, 0.0], change=0.0)) == (
        "reused nothing: both steps free to reuse reached the threshold (a higher threshold reuses more)")


def test_a_run_that_reused_has_no_such_line():
    run = run_over(SeaCacheConfig(), [1.0, 0.9375, 0.8333, 0.625, 0.0], change=0.0)
    assert run.stats.reused > 0 and reasons_line(run) == ""
    assert run.report("completed")["summary"] == run.stats.summary()
