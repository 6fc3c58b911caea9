"""Seam for sampling with context windows whose windows shift from step to step (core ``ContextWindowsManual`` /
``WanContextWindowsManual`` with a uniform or looped schedule, the default): the stack is the whole windowed
evaluation of one step. The gate decides once per step and branch on the full latent; a reused step runs no window
and returns the input plus the extrapolated residual (fused output minus input), a computed one runs every window.

The run's context handler is replaced, in the run's private model options, by :class:`GatedContextHandler`, which
delegates everything to it and gates ``execute``; model calls inside the windowed evaluation run plain. Static
schedules (the same windows every step) need no such seam: each window is a branch of its own (see
``SeaCacheRun.branch_keys``) and the model's own seam is used.
"""

from __future__ import annotations

import torch

from .base import Seam, latent_numel
from .call import CALL_OPTION, RUN_OPTION

NAME = "context windows: the whole windowed step (output minus input)"
HANDLER = "context_handler"
STATIC_SCHEDULES = ("standard_static", "batched")  # names of ComfyUI's schedules whose windows never move


def _branch_key(index: int, item: int) -> str:
    """Branch of one conditioning list of ``calc_cond_batch`` (0 cond, 1 uncond, further lists by index)."""
    return f"{('cond', 'uncond')[index] if index < 2 else f'cond{index}'}0/{item}"


class GatedContextHandler:
    """A context handler whose windowed evaluation of a step is one gated call."""

    def __init__(self, handler):
        object.__setattr__(self, "handler", handler)

    def __getattr__(self, name):
        return getattr(self.handler, name)

    def __setattr__(self, name, value):
        setattr(self.handler, name, value)

    def execute(self, calc_cond_batch, model, conds, x_in, timestep, model_options):
        """The outputs of every conditioning list: predicted on a reused step, else from every window."""
        options = model_options.get("transformer_options", {})
        run = options.get(RUN_OPTION)
        if run is None or CALL_OPTION in options or run.is_guidance_call(options):
            if run is not None and CALL_OPTION not in options:
                run.count_guidance_call()
            return self.handler.execute(calc_cond_batch, model, conds, x_in, timestep, model_options)
        active = [i for i, cond in enumerate(conds) if cond is not None]
        keys = [_branch_key(i, item) for i in active for item in range(x_in.shape[0])]
        stacked = torch.cat([x_in] * len(active))
        call = run.start_call(options, model, stacked, timestep, keys)
        predicted = call.enter(stacked)
        if predicted is None:
            inner = {**model_options, "transformer_options": {**options, CALL_OPTION: call}}
            outs = self.handler.execute(calc_cond_batch, model, conds, x_in, timestep, inner)
            call.leave(torch.cat([outs[i] for i in active]))
        else:  # lists without conditioning get zeros, as ComfyUI's own evaluation gives them
            outs = [torch.zeros_like(x_in) for _ in conds]
            for position, index in enumerate(active):
                outs[index] = predicted[position * x_in.shape[0] : (position + 1) * x_in.shape[0]]
        run.end_call(call)
        return outs


def _enter_run(model_options: dict) -> None:
    model_options[HANDLER] = GatedContextHandler(model_options[HANDLER])


def seam_for(model_patcher, model_options: dict) -> Seam | None:
    """The windowed-step seam when the run samples with context windows that move between steps, else None."""
    handler = model_options.get(HANDLER)
    if handler is None or getattr(getattr(handler, "context_schedule", None), "name", None) in STATIC_SCHEDULES:
        return None
    return Seam(NAME, latent_numel, _enter_run)
