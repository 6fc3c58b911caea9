"""SeaCacheRun: schedule lookup, reuse window and skipping a real stack function."""

import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.seacache_host import run_stack

SIGMAS = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.0]


def drive(run, latents, sigmas=SIGMAS):
    """Run a fake stack (residual linear in the step) over a schedule, counting real stack calls."""
    calls = []

    def stack(h):
        calls.append(1)
        return h * 2.0 + 1.0

    outs = []
    for sigma, latent in zip(sigmas[:-1], latents):
        h = torch.ones(1, 4, 8) * (1.0 - sigma)
        outs.append(run_stack(run, stack, h, latent, sigma, ["cond"]))
    return outs, len(calls)


def slowly_changing(n):
    base = torch.randn(1, 4, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    return [base * (1 + 0.001 * i) for i in range(n)]


def test_schedule_lookup_and_window():
    s = SeaCacheRun(SeaCacheConfig(threshold=1e9, gate="sea", max_consecutive=-1), torch.tensor(SIGMAS), range(2, 5))
    assert s.steps == 8
    assert [s.step_of(x) for x in (1.0, 0.7, 0.65, 0.0)] == [0, 3, None, None]
    assert [s.forced_later(i, 0) for i in (1, 2, 4, 5, 7)] == [True, False, False, True, True]
    drive(s, slowly_changing(8))
    assert [r.reason for r in s.stats.records] == ["warmup", "window", None, None, None, "window", "window", "end"]


def test_reuse_skips_the_stack_and_counts_match():
    s = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.5, max_consecutive=-1), SIGMAS)
    _, real_calls = drive(s, slowly_changing(8))
    assert s.stats.calls == 8
    assert real_calls == s.stats.ran < 8
    assert s.stats.reused == 8 - real_calls


def test_threshold_zero_is_exact():
    cached = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.0), SIGMAS)
    outs, real_calls = drive(cached, slowly_changing(8))
    assert real_calls == 8 and cached.stats.reused == 0
    expected = [torch.ones(1, 4, 8) * (1.0 - s) * 2.0 + 1.0 for s in SIGMAS[:-1]]
    assert all(torch.equal(a, b) for a, b in zip(outs, expected))


def test_off_schedule_sigma_always_computes():
    s = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=10.0), SIGMAS)
    _, real_calls = drive(s, slowly_changing(4), sigmas=[1.0, 0.95, 0.85, 0.75, 0.0])
    assert real_calls == 4
    assert [r.reason for r in s.stats.records[1:]] == ["off_schedule"] * 3


def test_report_carries_stats_and_run_parameters():
    s = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=0.5, max_consecutive=-1), SIGMAS)
    drive(s, slowly_changing(8))
    report = s.report("failed")
    assert (report["status"], report["threshold"], report["steps"]) == ("failed", 0.5, 8)
    assert report["calls"] == 8 and report["reused"] == s.stats.reused and len(report["records"]) == 8
    assert report["summary"] == s.stats.summary()


def _cubic_run(config, steps=12):
    """A run whose stack adds a residual cubic in the step index (the same latent every step, so every free step
    reuses at a high threshold); returns the run and each step's output error."""
    sigmas = [1 - i / steps for i in range(steps + 1)]
    cubic = lambda s: 0.5 + 0.1 * s - 0.02 * s**2 + 0.003 * s**3  # noqa: E731
    run = SeaCacheRun(config, sigmas)
    latent = torch.ones(2, 4, 3, 8, 8)
    errors = []
    for step in range(steps):
        out = run_stack(run, lambda h: h + cubic(step), torch.zeros(2, 6), latent, sigmas[step], ["cond", "uncond"])
        errors.append(float((out - cubic(step)).abs().max()))
    return run, errors


def test_chebyshev_forecaster_fits_every_computed_step_over_the_runs_own_steps():
    """With the ridge off and the fit alone, five computed steps forecast a cubic residual seven steps ahead exactly
    (degree 4, up to float32 rounding of large extrapolation weights); the Newton extrapolation through the last two
    misses by far more. Each branch's history is the configured Chebyshev one, its time map spanning the run."""
    from seacache_core.extrapolate import ResidualHistory
    from seacache_core.forecast import ChebyshevHistory

    base = dict(gate="sea", threshold=1e9, max_consecutive=-1, warmup_steps=5, end_steps=0)
    run, errors = _cubic_run(SeaCacheConfig(**base, forecaster="chebyshev", chebyshev_lambda=0.0, chebyshev_blend=1.0))
    assert run.stats.ran == 5 and max(errors) < 1e-2
    history = run.states["uncond"].history
    assert type(history) is ChebyshevHistory and len(history) == 5
    assert (history.step_span, history.capacity, history.blend, history.ridge_lambda, history.degree) == (12, 12, 1.0, 0.0, 4)
    assert history.order == 1
    newton_run, newton_errors = _cubic_run(SeaCacheConfig(**base))
    assert type(newton_run.states["cond"].history) is ResidualHistory and newton_run.stats.ran == 5
    assert max(newton_errors) > 0.5


def test_quadratic_weight_none_follows_the_flow_schedules_shift():
    """``quadratic_weight`` None takes the share of order 2's quadratic term from the run's schedule in the flow
    convention (``flow_sigmas`` where given): half at shift 3, whole at shift 10; a number is kept as given."""
    from cosmos3 import reference_sigmas

    shift3, shift10 = ([float(s) for s in reference_sigmas(35, shift)] for shift in (3.0, 10.0))
    follow = SeaCacheConfig(order=2, quadratic_weight=None)
    assert abs(SeaCacheRun(follow, shift3).new_history().quadratic_weight - 0.5) < 0.01
    assert SeaCacheRun(follow, shift10).new_history().quadratic_weight == 1.0
    assert SeaCacheRun(follow, [s * 7 for s in shift10], flow_sigmas=shift3).new_history().quadratic_weight < 0.51
    assert SeaCacheRun(SeaCacheConfig(order=2, quadratic_weight=0.3), shift10).new_history().quadratic_weight == 0.3


def test_warmup_steps_none_follows_the_flow_schedules_shift():
    """``warmup_steps`` None takes the forced first steps from the run's schedule in the flow convention: 4 up to
    shift 3 (up to speedup 3 under a speed target), 1 from shift 5 or speedup 4; the speed controller replays the
    same rule; a number is kept as given."""
    from cosmos3 import reference_sigmas
    from seacache_core.run import shift_warmup

    shifts = (1.0, 3.0, 3.5, 4.5, 5.0, 8.0, 10.0)
    schedule = {shift: [float(s) for s in reference_sigmas(35, shift)] for shift in shifts}
    assert [shift_warmup(schedule[shift]) for shift in shifts] == [4, 4, 4, 1, 1, 1, 1]
    assert [shift_warmup([float(s) for s in reference_sigmas(steps, 3.0)]) for steps in (4, 10, 50)] == [4, 4, 4]
    follow = SeaCacheConfig(warmup_steps=None)
    assert SeaCacheRun(follow, schedule[3.0]).config.warmup_steps == 4
    assert SeaCacheRun(follow, schedule[10.0]).config.warmup_steps == 1
    assert SeaCacheRun(follow, [s * 7 for s in schedule[10.0]], flow_sigmas=schedule[3.0]).config.warmup_steps == 4
    assert SeaCacheRun(SeaCacheConfig(warmup_steps=2), schedule[3.0]).config.warmup_steps == 2
    assert follow.warmup_steps is None  # the caller's config is left as given
    assert [shift_warmup(schedule[3.0], target) for target in (None, 2.0, 3.0, 4.0, 5.0)] == [4, 4, 4, 1, 1]
    timed = SeaCacheRun(SeaCacheConfig(warmup_steps=None, speedup=2.0), schedule[3.0])
    assert [timed.forced_later(step, 0) for step in range(5)] == [True] * 4 + [False]
    assert SeaCacheRun(SeaCacheConfig(warmup_steps=None, speedup=4.0), schedule[3.0]).config.warmup_steps == 1
