"""How SeaCache composes with other nodes on the same MODEL: another step cache is refused before the first step, and
the model calls of guidance are told apart from the sampler's."""

from __future__ import annotations

from functools import wraps

OTHER_CACHES = {
    "easycache": "EasyCache (core)",
    "lazycache": "LazyCache (core)",
    "teacache": "TeaCache (ComfyUI-TeaCache)",
    "rel_l1_thresh": "TeaCache (ComfyUI-TeaCache)",
    "magcache": "MagCache (ComfyUI-MagCache)",
}
GUIDANCE_FUNCTIONS = ("sampler_pre_cfg_function", "sampler_post_cfg_function")
GUIDANCE_OPTION = "seacache_guidance_call"  # marks the model calls a guidance function makes


def other_cache(model_patcher, model_options: dict) -> str | None:
    """The name of another step cache patched into this MODEL (by its wrapper or option keys), else None."""
    transformer_options = model_options.get("transformer_options", {})
    wrapper_keys = [key for wrappers in (transformer_options.get("wrappers", {}), getattr(model_patcher, "wrappers", {}))
                    for keyed in wrappers.values() for key in keyed]
    for name in [*wrapper_keys, *transformer_options]:
        for marker, cache in OTHER_CACHES.items():
            if marker in str(name).lower():
                return cache
    return None


def refuse_other_caches(model_patcher, model_options: dict) -> None:
    """ValueError naming the other step cache and the fix: each would skip work the other relies on."""
    cache = other_cache(model_patcher, model_options)
    if cache is not None:
        raise ValueError(
            f"SeaCache Apply and {cache} are both on this MODEL; two step caches cannot share one model (each "
            f"would skip work the other relies on). Remove one of the two nodes from the model chain."
        )


def options_signature(transformer_options: dict) -> dict:
    """The replacement patches a call runs with, by identity."""
    replaced = transformer_options.get("patches_replace", {})
    return {kind: {key: id(patch) for key, patch in patches.items()} for kind, patches in replaced.items()}


def marked_as_guidance(model_options: dict) -> dict:
    """A copy of ``model_options`` whose calls carry ``GUIDANCE_OPTION``."""
    return {**model_options, "transformer_options": {**model_options.get("transformer_options", {}), GUIDANCE_OPTION: True}}


def mark_guidance_calls(model_options: dict) -> bool:
    """Wrap the run's pre-/post-CFG functions so the model calls they make carry the mark in their own options (whatever
    thread runs them); True when there are any."""

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
