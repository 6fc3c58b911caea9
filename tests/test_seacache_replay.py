"""Offline replay through the gate."""

import torch

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.replay import replay


def _latents(n, batch=1):
    g = torch.Generator().manual_seed(0)
    base, drift = torch.randn(batch, 3, 4, 6, 8, generator=g), torch.randn(batch, 3, 4, 6, 8, generator=g)
    return [base + 0.04 * i * drift * (1 + i % 3) for i in range(n)]


def _manual(config, sigmas, latents, keys):
    n = len(latents)
    schedule = [float(s) for s in sigmas[:n]] + [0.0]
    gate = SeaCacheRun(config, schedule)
    for step, latent in enumerate(latents):
        residual = torch.randn(len(keys), 2, 7)
        decision = gate.decide(latent, schedule[step], list(keys))
        if gate.predict(decision, residual) is None:
            gate.commit(decision, residual)
    return gate.stats


def _view(stats):
    return [(r.step, r.decision, r.reason, r.distance, r.accumulated) for r in stats.records]


def test_replay_matches_manual_gate_loop():
    n = 15
    sigmas = torch.cat([torch.linspace(0.7, 0.5, n), torch.zeros(1)])  # ComfyUI style: a trailing final sigma
    latents = _latents(n)
    config = SeaCacheConfig(gate="sea", threshold=0.2, max_consecutive=3)
    stats = replay(config, sigmas, latents)
    assert _view(stats) == _view(_manual(config, sigmas, latents, ("cond",)))
    assert stats.calls == n and 0 < stats.reused < n - 2
    assert stats.ran + stats.reused == stats.calls


def test_replay_cfg_branches_share_one_latent():
    n = 10
    sigmas = torch.linspace(0.7, 0.5, n).tolist()
    latents = _latents(n)
    config = SeaCacheConfig(gate="sea", threshold=0.3)
    shared = replay(config, sigmas, latents, keys=("cond", "uncond"))
    doubled = _manual(config, sigmas, [torch.cat([x, x]) for x in latents], ("cond", "uncond"))
    assert _view(shared) == _view(doubled)
    assert set(shared.records[-1].branches) == {"cond", "uncond"}
