"""What every seam shares: its descriptor and the APPLY_MODEL gate that decides a call on the sampler's latent
and hands the decision to the seam."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import comfy.patcher_extension

from ..seacache_runtime import RUN_KEY, SETTINGS_KEY, ComfyRun
from .call import CALL_KEY, StackCall
from .sampling import flow_view

WRAPPER_KEY = "seacache"


@dataclass(frozen=True)
class Seam:
    """Where SeaCache takes the residual of a model: ``name`` (shown by the Stats node), ``install``, which
    registers the seam's wrappers or patches on the patched clone, and ``auto_order``, the residual order
    SeaCache Apply's "auto" picks: 2 where it was measured better (the Cosmos3 architecture, README Quality),
    vLLM-Omni's 1 elsewhere."""

    name: str
    install: Callable[[object], None]
    auto_order: int = 1


class ApplyModelGate:
    """APPLY_MODEL wrapper: gates each call on the latent the sampler passes (mapped to the flow convention by
    :func:`flow_view`) and hands the :class:`StackCall` to the seam through ``transformer_options`` (and, for
    seams the options do not reach, through ``bind(base_model, call)``, a context manager)."""

    def __init__(self, seam: str, bind: Callable | None = None):
        self.seam, self.bind = seam, bind

    def __call__(self, executor, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
        run: ComfyRun | None = transformer_options.get(RUN_KEY)
        if run is None:
            return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
        base_model = executor.class_obj
        sigma = float(t.flatten()[0])
        scale, filter_sigma = flow_view(base_model.model_sampling, sigma)
        keys = run.begin_call(transformer_options, x.shape[0])
        latent = x if scale == 1.0 else x * scale
        call = StackCall(run.session, run.session.decide(latent, sigma, keys, filter_sigma), x.shape[0], self.seam, x.shape[1])
        options = {**transformer_options, CALL_KEY: call}
        with self.bind(base_model, call) if self.bind is not None else nullcontext():
            out = executor(x, t, c_concat, c_crossattn, control, options, **kwargs)
        call.finish()
        run.end_call(transformer_options[SETTINGS_KEY])
        return out


def install_apply_gate(patched, seam: str, bind: Callable | None = None) -> None:
    """Register the APPLY_MODEL gate for a seam that is not gated by the model itself."""
    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.APPLY_MODEL, WRAPPER_KEY, ApplyModelGate(seam, bind))
