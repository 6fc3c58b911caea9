"""Run-start checks of what the sampler hands SeaCache (``CFGGuider.outer_sample``'s arguments): each failure is a
ValueError naming the problem and the fix, before the first model call (docs/algorithm.md §8)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.distributed as dist

from ...seacache_core.sea_filter import FIRST_BLOCK_GATES

OUTER_SAMPLE_ARGS = ("noise", "latent_image", "sampler", "sigmas", "denoise_mask", "callback", "disable_pbar", "seed",
                     "latent_shapes")
SHAPES = "[B, C, H, W] (image) or [B, C, T, H, W] (video)"


def refuse_latent_rank(shape: Sequence[int]) -> None:
    """ValueError unless the gated latent is 4-D or 5-D: a 1-D latent has no frequencies to weigh."""
    if len(shape) not in (4, 5):
        raise ValueError(
            f"SeaCache Apply serves image and video models, whose latents are {SHAPES}; this run's latent has shape "
            f"{tuple(shape)} (an audio model's [B, C, L] looks like this), which the SEA filter cannot weigh. Connect "
            f"this sampler to the MODEL without SeaCache Apply."
        )


def refuse_non_finite(tensors: dict[str, torch.Tensor]) -> None:
    """ValueError naming each tensor that holds NaN or Inf (one host read for all)."""
    names = list(tensors)
    if not names:
        return
    device = tensors[names[0]].device
    finite = torch.stack([torch.isfinite(t).all().to(device) for t in tensors.values()]).tolist()
    bad = [name for name, ok in zip(names, finite) if not ok]
    if bad:
        raise ValueError(
            f"The {' and the '.join(bad)} given to the sampler hold NaN or Inf, so every step would be NaN and "
            f"SeaCache's distances meaningless. Check the node that made it (a VAE encode in the wrong precision, "
            f"a latent from a failed run, a custom noise or latent node) and feed a finite latent."
        )


def refuse_bad_schedule(sigmas: Sequence[float]) -> None:
    """ValueError for NaN/Inf sigmas or a schedule that rises: calls map to steps by sigma along a falling schedule
    (restart samplers hand over a falling one and go back up inside)."""
    values = [float(s) for s in sigmas]
    if not all(math.isfinite(s) for s in values):
        raise ValueError(
            f"The sigma schedule holds NaN or Inf ({values}). Check the scheduler node or the SIGMAS input that "
            f"built it; every sigma must be a finite number."
        )
    rises = [i for i in range(1, len(values)) if values[i] > values[i - 1]]
    if rises:
        i = rises[0]
        raise ValueError(
            f"SeaCache needs a falling sigma schedule, but sigma rises from {values[i - 1]:g} to {values[i]:g} at "
            f"step {i} of {values}. Fix the SIGMAS input (a node that joins or edits schedules), or, for unsampling "
            f"and inversion (FlipSigmas), connect that sampler to the MODEL without SeaCache Apply."
        )


def refuse_bad_run_inputs(args: tuple, kwargs: dict) -> tuple[torch.Tensor, int]:
    """The run's sigmas and the gated latent's channel count (an audio-video latent's first stream), after the checks
    above."""
    given = {**dict(zip(OUTER_SAMPLE_ARGS, args)), **kwargs}
    latent, shapes = given["latent_image"], given.get("latent_shapes")
    gated = tuple(shapes[0]) if shapes is not None and len(shapes) > 1 else tuple(latent.shape)
    refuse_latent_rank(gated)
    refuse_bad_schedule(given["sigmas"].flatten().tolist())
    refuse_non_finite({"input latent": latent, "noise": given["noise"]})
    return given["sigmas"], int(gated[1])


def refuse_unreachable_first_block(config, seam, conds: dict) -> None:
    """ValueError when a first-block gate cannot get the first block's view: the seam does not reach it, the run is
    sequence-parallel, or the seam refuses the conditioning ``conds`` (``{}`` at Apply)."""
    if config.gate not in FIRST_BLOCK_GATES:
        return
    if seam.refuse_view_conds is None:
        raise ValueError(
            f"SeaCache Apply's first-block gates read the first transformer block's input, which SeaCache cannot "
            f"reach on this model (seam: {seam.name}); they serve this pack's Cosmos3, Wan, HunyuanVideo, Flux, "
            f"Qwen-Image and LTX-Video. Use gate 'sea same-sigma' (or 'sea')."
        )
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        raise ValueError(
            f"SeaCache Apply's first-block gates filter the first block's input over the whole video, but in this "
            f"sequence-parallel run ({dist.get_world_size()} ranks) each rank holds part of its tokens. Use gate "
            f"'sea same-sigma' (or 'sea'), which reads the latent every rank holds whole."
        )
    seam.refuse_view_conds(conds)
