"""Run-start checks of what ComfyUI's sampler hands SeaCache (the arguments of ``CFGGuider.outer_sample``): the
latent the gate will see, latent and noise finite, the sigma schedule. The checks themselves are
:mod:`seacache_core.run_inputs`; this module only finds their inputs in the sampler's arguments."""

from __future__ import annotations

from ...seacache_core.run_inputs import refuse_bad_schedule, refuse_latent_rank, refuse_non_finite

OUTER_SAMPLE_ARGS = ("noise", "latent_image", "sampler", "sigmas", "denoise_mask", "callback", "disable_pbar", "seed",
                     "latent_shapes")


def refuse_bad_run_inputs(args: tuple, kwargs: dict) -> None:
    """ValueError, before any model call, for a latent that is not an image or video latent, NaN/Inf in the latent,
    the noise or the sigmas, or a sigma schedule that rises. The gate decides on the first stream of an audio-video
    latent packed by ComfyUI (``latent_shapes``, as :func:`.sampling.av_streams` unpacks it), else on the
    latent itself."""
    given = {**dict(zip(OUTER_SAMPLE_ARGS, args)), **kwargs}
    latent, shapes = given["latent_image"], given.get("latent_shapes")
    refuse_latent_rank(tuple(shapes[0]) if shapes is not None and len(shapes) > 1 else tuple(latent.shape))
    refuse_bad_schedule(given["sigmas"].flatten().tolist())
    refuse_non_finite({"input latent": latent, "noise": given["noise"]})
