"""The "sea_same_sigma" gate: both latents filtered at the current sigma (seacache_core.sea_filter.Indicator)."""

import pytest
import torch

from seacache_core import SeaCacheConfig, SeaCacheRun, item_distances, sea_filter_float32
from seacache_testing.replay import replay

SHAPE = (1, 3, 4, 6, 8)
SAME = dict(gate="sea_same_sigma")


def _latents(n, batch=1, scale=0.03, seed=0):
    g = torch.Generator().manual_seed(seed)
    base, drift = torch.randn(batch, *SHAPE[1:], generator=g), torch.randn(batch, *SHAPE[1:], generator=g)
    return [base + scale * i * drift for i in range(n)]


def _sigmas(n):
    """Early steps of a strongly shifted schedule: sigma close to 1, where the filter changes fastest."""
    return torch.linspace(0.999, 0.95, n).tolist()


def rel_l1(current, previous) -> float:
    return float(item_distances(current, previous))


def _run(config, latents, keys=("c",), sigmas=None, filter_sigma=None):
    """A run over the latents, one call per step; ``filter_sigma`` filters every step at that one sigma."""
    sigmas = sigmas or _sigmas(len(latents))
    gate = SeaCacheRun(config, [*sigmas, 0.0])
    for latent, sigma in zip(latents, sigmas):
        residual = torch.randn(len(keys), 5)
        decision = gate.decide(latent, sigma, list(keys), filter_sigma)
        if gate.predict(decision, residual) is None:
            gate.commit(decision, residual)
    return gate


def test_distance_filters_both_latents_at_the_current_sigma():
    a, b = _latents(2)
    gate = _run(SeaCacheConfig(threshold=100.0, **SAME), [a, b], sigmas=[0.99, 0.98])
    paper = _run(SeaCacheConfig(gate="sea", threshold=100.0), [a, b], sigmas=[0.99, 0.98])
    same = gate.stats.records[1].distance
    assert same == pytest.approx(rel_l1(sea_filter_float32(b, 0.98), sea_filter_float32(a, 0.98)), rel=1e-5)
    assert paper.stats.records[1].distance == pytest.approx(rel_l1(sea_filter_float32(b, 0.98), sea_filter_float32(a, 0.99)), rel=1e-5)
    assert paper.stats.records[1].distance > 2 * same  # near sigma 1 the filter's own change dominates the paper's
    torch.testing.assert_close(gate.states["c"].indicator, b)  # the state keeps the raw latent


def test_equal_to_the_paper_at_one_sigma():
    latents = _latents(8)
    same = _run(SeaCacheConfig(threshold=0.5, **SAME), latents, filter_sigma=0.5)
    paper = _run(SeaCacheConfig(gate="sea", threshold=0.5), latents, filter_sigma=0.5)
    assert [r.decision for r in same.stats.records] == [r.decision for r in paper.stats.records]
    for r, q in zip(same.stats.records[1:], paper.stats.records[1:]):
        assert r.distance == pytest.approx(q.distance, rel=1e-5)
    assert 0 < same.stats.reused < 6


def test_threshold_zero_never_reuses():
    gate = _run(SeaCacheConfig(threshold=0.0, max_consecutive=-1, **SAME), [_latents(1)[0]] * 10)
    assert gate.stats.reused == 0 and gate.stats.ran == 10
    assert [r.reason for r in gate.stats.records[1:-1]] == ["threshold"] * 8
    assert all(r.distance == 0.0 for r in gate.stats.records[1:])


def test_reuses_more_than_the_paper_near_sigma_one():
    latents = _latents(12, scale=0.002)
    same = _run(SeaCacheConfig(threshold=0.2, max_consecutive=-1, **SAME), latents)
    paper = _run(SeaCacheConfig(gate="sea", threshold=0.2, max_consecutive=-1), latents)
    assert same.stats.reused > paper.stats.reused


def test_branches_keep_their_own_state():
    n = 8
    cond, uncond = _latents(n, scale=0.01, seed=1), _latents(n, scale=0.3, seed=2)
    config = SeaCacheConfig(threshold=1e9, max_consecutive=2, **SAME)
    batched = _run(config, [torch.cat([c, u]) for c, u in zip(cond, uncond)], keys=("c", "u"))
    alone = {key: _run(config, latents, keys=(key,)) for key, latents in (("c", cond), ("u", uncond))}
    for key in ("c", "u"):
        state, single = batched.states[key], alone[key].states[key]
        torch.testing.assert_close(state.indicator, single.indicator)
        assert state.accumulated == pytest.approx(single.accumulated, rel=1e-6)
        distances = [r.branches[key]["distance"] for r in batched.stats.records[1:]]
        assert distances == pytest.approx([r.distance for r in alone[key].stats.records[1:]], rel=1e-5)
    last = batched.stats.records[-2]
    assert last.branches["u"]["distance"] > 2 * last.branches["c"]["distance"]


def test_replay_matches_the_live_gate():
    n = 12
    sigmas = _sigmas(n) + [0.0]
    latents = _latents(n, scale=0.01)
    config = SeaCacheConfig(threshold=0.1, max_consecutive=3, **SAME)
    stats = replay(config, sigmas, latents, keys=("cond", "uncond"))
    live = _run(config, [torch.cat([x, x]) for x in latents], keys=("cond", "uncond"), sigmas=sigmas[:n])
    view = lambda s: [(r.step, r.decision, r.reason, r.distance, r.accumulated) for r in s.records]  # noqa: E731
    assert view(stats) == view(live.stats)
    assert 0 < stats.reused < n - 2


def test_unknown_gate_is_refused():
    with pytest.raises(ValueError, match="gate must be one of"):
        SeaCacheConfig(gate="schedule")
