"""Plain-torch host of a SeaCache run (the ComfyUI nodes use wrappers instead): one call of a stack that is one
callable, and the native Cosmos3's generator stack routed through it."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import torch

from seacache_core import SeaCacheRun

BRANCHES = ("cond", "uncond")


def run_stack(run: SeaCacheRun, stack: Callable[[torch.Tensor], torch.Tensor], stack_in: torch.Tensor,
              latent: torch.Tensor, sigma: float, keys: Sequence[Hashable], sound: torch.Tensor | None = None):
    """The stack output of one call whose stack is one callable: ``stack_in`` plus the extrapolated residual when
    the gate allows, otherwise ``stack(stack_in)`` with its residual committed. A gate that reads the first
    block's input is refused (ValueError): its host enters the stack with that view (``SeaCacheRun.pending``)."""
    if run.indicator.reads_first_block:
        raise ValueError(f"gate {run.config.gate!r} reads the first block's input, not the latent: create the "
                         f"call with pending() and enter the stack with the first block's view")
    verdict = run.decide(latent, sigma, keys, sound=sound)
    residual = run.predict(verdict, stack_in)
    if residual is not None:
        return stack_in + residual
    out = stack(stack_in)
    run.commit(verdict, out - stack_in)
    return out


class SeaCachedCosmos3:
    """Installed as a model's ``call_gen_stack``: routes the generator stack through ``run`` (a
    ``seacache_core.SeaCacheRun``; a plain call without one); a call carries the cond and uncond items batched, in
    that order, and the gate reads its sound latent too when it has one."""

    def __init__(self, model, run: SeaCacheRun | None = None):
        self.model, self.run = model, run

    def __call__(self, hidden, inputs):
        if self.run is None:
            return self.model.run_gen_stack(hidden, inputs)
        stack = lambda h: self.model.run_gen_stack(h, inputs)  # noqa: E731
        return run_stack(self.run, stack, hidden, inputs.latent, inputs.host.sigma[0], list(BRANCHES), inputs.sound)
