"""The first block's timestep-modulated input of ComfyUI's core models, computed from what the first block's
replace patch receives (``transformer_options["patches_replace"]["dit"][("double_block", 0)]``: the block's
arguments) and the block module itself, without changing the model: the image tokens ``[B, N, D]`` the block feeds
the image projection of its self-attention. The published SeaCache indicator filters these
(``seacache_core.first_block``; docs/first-block-indicator.md).

Not wired into the runtime yet: a first-block gate has to decide inside the first block's patch, where the
runtime today decides before the model call. Cases the patch arguments do not describe are refused with
ValueError: Flux and Qwen-Image reference latents with the ``index_timestep_zero`` method (a second timestep's
modulation, chosen inside the model's closure).
"""

from __future__ import annotations

import comfy.ldm.common_dit
import comfy.model_management
import torch
from comfy.ldm.flux.layers import apply_mod
from comfy.ldm.wan.model import repeat_e


def wan(block, args: dict) -> torch.Tensor:
    """``WanAttentionBlock`` (Wan 2.1/2.2): ``norm1(x) * (1 + scale) + shift`` with shift and scale the first two of
    the block's ``modulation`` table plus the time projection ``vec`` (one per item, or per frame for Wan 2.2's
    per-token timesteps)."""
    x, e = args["img"], args["vec"]
    table = comfy.model_management.cast_to(block.modulation, dtype=x.dtype, device=x.device)
    if e.ndim < 4:
        shift, scale = (table + e).chunk(6, dim=1)[:2]
    else:
        shift, scale = (table.unsqueeze(0) + e).unbind(2)[:2]
    return torch.addcmul(repeat_e(shift, x), block.norm1(x.contiguous()), 1 + repeat_e(scale, x))


def double_stream(block, args: dict) -> torch.Tensor:
    """``comfy.ldm.flux.layers.DoubleStreamBlock`` (Flux, HunyuanVideo): ``img_norm1(img) * (1 + scale) + shift``
    from the block's ``img_mod`` of ``vec`` (Flux 2 passes the modulation precomputed), per token range where
    HunyuanVideo's token-replace image-to-video gives the first frame its own (``modulation_dims_img``)."""
    vec = args["vec"]
    if isinstance(vec, torch.Tensor) and vec.ndim == 3 and args.get("modulation_dims_img") is None:
        raise ValueError("a second timestep's modulation (reference latents, index_timestep_zero) is not in the "
                         "block patch's arguments")
    modulation = block.img_mod(vec)[0] if getattr(block, "modulation", True) else vec[0][0]
    return apply_mod(block.img_norm1(args["img"]), 1 + modulation.scale, modulation.shift,
                     args.get("modulation_dims_img"))


def qwen_image(block, args: dict) -> torch.Tensor:
    """``QwenImageTransformerBlock``: ``img_norm1(img) * (1 + scale) + shift`` from the first half of the block's
    ``img_mod`` of the timestep embedding ``vec``."""
    img, temb = args["img"], args["vec"]
    if temb.shape[0] != img.shape[0]:
        raise ValueError("a second timestep's modulation (reference latents, index_timestep_zero) is not in the "
                         "block patch's arguments")
    return block._modulate(block.img_norm1(img), block.img_mod(temb).chunk(2, dim=-1)[0])[0]


def ltxv(block, args: dict) -> torch.Tensor:
    """LTX-Video's ``BasicTransformerBlock``: ``rms_norm(x) * (1 + scale) + shift`` with shift and scale the first
    two of the block's ``scale_shift_table`` plus the timestep embedding ``vec`` (one per item, or per token where
    conditioned frames get timestep 0), through the same fused kernel the block uses where ComfyUI has one."""
    x, t = args["img"], args["vec"]
    table = block.scale_shift_table
    ada = (table[None, None, :2].to(device=x.device, dtype=x.dtype)
           + t.reshape(x.shape[0], t.shape[1], table.shape[0], -1)[:, :, :2, :])
    shift, scale = ada.unbind(dim=2)
    fused = getattr(getattr(comfy, "quant_ops", None), "ck", None)
    if fused is not None and not comfy.model_management.in_training:
        return fused.rms_adaln(x, scale, shift)
    return comfy.ldm.common_dit.rms_norm(x) * (1 + scale) + shift


FAMILIES = {
    ("comfy.ldm.wan.model", "WanModel"): wan,
    ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"): double_stream,
    ("comfy.ldm.flux.model", "Flux"): double_stream,
    ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"): qwen_image,
    ("comfy.ldm.lightricks.model", "LTXVModel"): ltxv,
}
"""(module, exact class) of a diffusion model -> the function computing its first block's modulated input."""
