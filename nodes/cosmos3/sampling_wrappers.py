"""The outer-sample wrappers the loader installs on every Cosmos3 model: each sampling run gets its own text K/V
cache, and conditioned (I2V) regions come back exactly as given."""

from __future__ import annotations

import comfy.sampler_helpers

from ...cosmos3 import TEXT_KV_CACHE_KEY
from ..run_scope import run_scoped_option
from .text_kv_cache import HookAwareTextKVCache


def text_kv_outer_sample(executor, *args, **kwargs):
    """Give each sampling run its own text K/V cache (the text pathway then runs once per prompt, weight hooks
    and run)."""
    cache = HookAwareTextKVCache(executor.class_obj.model_patcher.model)
    try:
        with run_scoped_option(executor.class_obj, TEXT_KV_CACHE_KEY, cache):
            return executor(*args, **kwargs)
    finally:
        cache.clear()


def keep_conditioned_outer_sample(executor, noise, latent_image, sampler, sigmas, denoise_mask=None, *args, **kwargs):
    """Return conditioned (noise-masked) regions exactly as given. The model already sees them clean and
    predicts zero velocity there, but multistep samplers such as UniPC end slightly off a kept region; the
    reference pipeline keeps conditioned frames bit-exact, so the final latent takes them from the input."""
    out = executor(noise, latent_image, sampler, sigmas, denoise_mask, *args, **kwargs)
    if denoise_mask is None:
        return out
    mask = comfy.sampler_helpers.prepare_mask(denoise_mask, out.shape, out.device)
    return out * mask + latent_image.to(out) * (1.0 - mask)
