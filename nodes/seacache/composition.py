"""How SeaCache composes with what other nodes put on the same MODEL: other step caches are refused before the
first step, and model calls that belong to guidance rather than to the sampler's step run uncached."""

from __future__ import annotations

from functools import wraps

# Other step caches, recognised by the wrapper keys or transformer_options keys their nodes register.
OTHER_CACHES = {
    "easycache": "EasyCache (core)",
    "lazycache": "LazyCache (core)",
    "teacache": "TeaCache (ComfyUI-TeaCache)",
    "rel_l1_thresh": "TeaCache (ComfyUI-TeaCache)",
    "magcache": "MagCache (ComfyUI-MagCache)",
}
GUIDANCE_FUNCTIONS = ("sampler_pre_cfg_function", "sampler_post_cfg_function")
GUIDANCE_OPTION = "seacache_guidance_call"
"""transformer_options key set on the model calls a guidance function makes (they run uncached)."""


def other_cache(model_patcher, model_options: dict) -> str | None:
    """The name of another step cache patched into this MODEL, else None: its wrapper keys first (each node's
    own), then its transformer_options keys. Two caches would each skip work the other believes was done."""
    transformer_options = model_options.get("transformer_options", {})
    wrapper_keys = [key for wrappers in (transformer_options.get("wrappers", {}), getattr(model_patcher, "wrappers", {}))
                    for keyed in wrappers.values() for key in keyed]
    for name in [*wrapper_keys, *transformer_options]:
        for marker, cache in OTHER_CACHES.items():
            if marker in str(name).lower():
                return cache
    return None


def refuse_other_caches(model_patcher, model_options: dict) -> None:
    """ValueError naming the other step cache on this MODEL and the fix (before the first step)."""
    cache = other_cache(model_patcher, model_options)
    if cache is not None:
        raise ValueError(
            f"SeaCache Apply and {cache} are both on this MODEL; two step caches cannot share one model (each "
            f"would skip work the other relies on). Remove one of the two nodes from the model chain."
        )


def options_signature(transformer_options: dict) -> dict:
    """Which block/attention replacement patches a call runs with (by identity), to tell the sampler's calls from
    guidance calls with their own patches (skip-layer guidance, perturbed attention)."""
    replaced = transformer_options.get("patches_replace", {})
    return {kind: {key: id(patch) for key, patch in patches.items()} for kind, patches in replaced.items()}


def marked_as_guidance(model_options: dict) -> dict:
    """A copy of ``model_options`` whose calls are marked as guidance calls (``GUIDANCE_OPTION`` in their
    transformer_options); the given options are not changed."""
    return {**model_options, "transformer_options": {**model_options.get("transformer_options", {}), GUIDANCE_OPTION: True}}


def mark_guidance_calls(model_options: dict) -> bool:
    """Wrap the run's pre-/post-CFG functions (in the run's private options) so that the model calls they make carry
    ``GUIDANCE_OPTION``: the mark travels with each call's options, so it holds in whichever thread runs the call
    (ComfyUI's MultiGPU pool) and is never seen by another thread's calls; nothing is shared between calls.
    True when the run has such functions (their calls may follow the step's main call and keep a history)."""

    def marked(function):
        @wraps(function)
        def guidance(args):
            if "model_options" not in args:
                return function(args)
            return function({**args, "model_options": marked_as_guidance(args["model_options"])})

        return guidance

    for name in GUIDANCE_FUNCTIONS:
        if name in model_options:
            model_options[name] = [marked(function) for function in model_options[name]]
    return any(model_options.get(name) for name in GUIDANCE_FUNCTIONS)
