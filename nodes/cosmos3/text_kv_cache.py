"""The text K/V cache of a ComfyUI sampling run. ComfyUI's weight hooks can change the text pathway's weights
within a run, so here an entry is keyed by the hooks applied as well as by the prompt: a prompt never meets K/V
computed with other weights."""

from __future__ import annotations

from ...cosmos3 import TextKVCache


class HookAwareTextKVCache(TextKVCache):
    """The run's text K/V cache, its entries keyed also by the weight hooks applied for the call: ComfyUI's hooks
    (a LoRA on one conditioning, keyframed strengths) patch the text pathway's weights in the middle of a run, so
    the same prompt can meet other weights. Without hooks the keys are the plain ones."""

    def __init__(self, base_model):
        super().__init__()
        self.base_model = base_model

    def _with_hooks(self, key: tuple) -> tuple:
        """``key`` plus each applied hook and its strength at this step (what decides the hooked weights)."""
        hooks = getattr(getattr(self.base_model, "current_patcher", None), "current_hooks", None)
        return key if hooks is None else (key, tuple((hook, hook.strength) for hook in hooks.hooks))

    def get(self, key):
        return super().get(self._with_hooks(key))

    def put(self, key, entry):
        super().put(self._with_hooks(key), entry)
