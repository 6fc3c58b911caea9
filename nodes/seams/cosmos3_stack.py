"""Seam for this pack's Cosmos3: the generator stack (``run_gen_stack``, every layer's generator pathway over
cached text K/V), wrapped through the model's own ``GEN_STACK_WRAPPER``. A reused call runs neither the
generator layers nor the text pathway."""

from __future__ import annotations

from ..cosmos3_model import GEN_STACK_WRAPPER, Cosmos3
from ..seacache_runtime import RUN_KEY, SETTINGS_KEY, ComfyRun
from .base import WRAPPER_KEY, Seam

NAME = "Cosmos3 generator stack (this pack)"


def gen_stack_wrapper(executor, hidden, inputs):
    """The generator-stack wrapper: gated inside a run, a plain call otherwise (e.g. outside sampling)."""
    opts = inputs.transformer_options
    run: ComfyRun | None = opts.get(RUN_KEY)
    if run is None:
        return executor(hidden, inputs)
    keys = run.begin_call(opts, hidden.shape[0])
    out = run.session.run(lambda h: executor(h, inputs), hidden, inputs.latent, inputs.host.sigma[0], keys)
    run.end_call(opts[SETTINGS_KEY])
    return out


def _install(patched) -> None:
    patched.add_wrapper_with_key(GEN_STACK_WRAPPER, WRAPPER_KEY, gen_stack_wrapper)


def plan(model) -> Seam | None:
    """The generator-stack seam for a MODEL from this pack's Cosmos3 Loader, None for any other model."""
    if isinstance(getattr(model, "model", None), Cosmos3):
        return Seam(NAME, _install, auto_order=2)
    return None
