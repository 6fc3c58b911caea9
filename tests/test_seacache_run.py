"""SeaCacheRun: schedule lookup, reuse window and skipping a real stack function."""

import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun

SIGMAS = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.0]


def drive(session, latents, sigmas=SIGMAS):
    """Run a fake stack (residual linear in the step) over a schedule, counting real stack calls."""
    calls = []

    def stack(h):
        calls.append(1)
        return h * 2.0 + 1.0

    outs = []
    for sigma, latent in zip(sigmas[:-1], latents):
        h = torch.ones(1, 4, 8) * (1.0 - sigma)
        outs.append(session.run(stack, h, latent, sigma, ["cond"]))
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
