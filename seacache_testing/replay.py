"""Offline replay of a run through the gate, without any model, to evaluate thresholds (docs/algorithm.md §10)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from seacache_core import RunStats, SeaCacheConfig, SeaCacheRun


def replay(
    config: SeaCacheConfig,
    sigmas: Sequence[float] | torch.Tensor,
    latents_by_step: Sequence[torch.Tensor],
    keys: Sequence[Hashable] = ("cond",),
) -> RunStats:
    """Run the gate over a recorded run and return the statistics it would produce.

    `latents_by_step[i]` is the latent the model saw at step i, batched in the order of `keys` ([len(keys),
    C, T, H, W] or [len(keys), C, H, W]); a batch of 1 is seen by every key (the usual CFG case, where cond
    and uncond get the same noisy latent). `sigmas[i]` is the sigma of step i; the run has `len(latents_by_step)`
    steps (a trailing final sigma, as ComfyUI's schedules have, is ignored; without one the schedule ends at 0).

    No model runs, so there is no real residual: each computed call commits a zero placeholder of shape
    [len(keys), 1], which only serves to make the residual history non-empty; the decisions depend on the
    latents alone. Latents recorded from an uncached run approximate a cached one, whose latents would
    differ slightly after each reused step.
    """
    keys = tuple(keys)
    num_steps = len(latents_by_step)
    if len(sigmas) < num_steps:
        raise ValueError(f"got {len(sigmas)} sigmas for {num_steps} steps")
    schedule = [float(s) for s in sigmas[:num_steps]] + [0.0]
    run = SeaCacheRun(config, schedule)
    for latent in latents_by_step:
        if latent.shape[0] == 1 and len(keys) > 1:
            latent = latent.expand(len(keys), *latent.shape[1:])
        placeholder = torch.zeros(len(keys), 1, device=latent.device)
        verdict = run.decide(latent, schedule[run.stats.calls], keys)
        if run.predict(verdict, placeholder) is None:
            run.commit(verdict, placeholder)
    run.release()
    return run.stats
