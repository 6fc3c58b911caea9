"""Plain-torch host of a SeaCache run for the native Cosmos3 (the ComfyUI nodes use wrappers instead)."""

from __future__ import annotations

BRANCHES = ("cond", "uncond")


class SeaCachedCosmos3:
    """Installed as a model's ``call_gen_stack``: routes the generator stack through the ``session`` (a
    ``seacache_core.SeaCacheRun``; a plain call without one); a call carries the cond and uncond items batched, in that order, and the gate reads its sound
    latent too when it has one."""

    def __init__(self, model, session=None):
        self.model, self.session = model, session

    def __call__(self, hidden, inputs):
        if self.session is None:
            return self.model.run_gen_stack(hidden, inputs)
        stack = lambda h: self.model.run_gen_stack(h, inputs)  # noqa: E731
        return self.session.run(stack, hidden, inputs.latent, inputs.host.sigma[0], list(BRANCHES), inputs.sound)
