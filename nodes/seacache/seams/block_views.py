"""The first block's modulated input of ComfyUI's core models, from its replace-patch arguments and the block module:
the image tokens the first-block gates read (docs/first-block-indicator.md §6). Conditioning that puts other tokens
first or a second modulation on them is refused at run start."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import comfy.ldm.common_dit
import comfy.model_management
import torch

from ....seacache_core.vision_tokens import VisionTokens, first_block_view


def wan(block, args: dict) -> torch.Tensor:
    """``WanAttentionBlock``: ``norm1(x) * (1 + scale) + shift`` from ``modulation + vec``."""
    from comfy.ldm.wan.model import repeat_e

    x, e = args["img"], args["vec"]
    table = comfy.model_management.cast_to(block.modulation, dtype=x.dtype, device=x.device)
    if e.ndim < 4:
        shift, scale = (table + e).chunk(6, dim=1)[:2]
    else:
        shift, scale = (table.unsqueeze(0) + e).unbind(2)[:2]
    return torch.addcmul(repeat_e(shift, x), block.norm1(x.contiguous()), 1 + repeat_e(scale, x))


def double_stream(block, args: dict) -> torch.Tensor:
    """``DoubleStreamBlock`` (Flux, HunyuanVideo): ``img_norm1(img)`` modulated by ``img_mod(vec)``."""
    from comfy.ldm.flux.layers import apply_mod

    vec = args["vec"]
    if isinstance(vec, torch.Tensor) and vec.ndim == 3 and args.get("modulation_dims_img") is None:
        raise ValueError("a second timestep's modulation (reference latents, index_timestep_zero) is not in the "
                         "block patch's arguments")
    modulation = block.img_mod(vec)[0] if getattr(block, "modulation", True) else vec[0][0]
    return apply_mod(block.img_norm1(args["img"]), 1 + modulation.scale, modulation.shift,
                     args.get("modulation_dims_img"))


def qwen_image(block, args: dict) -> torch.Tensor:
    """``QwenImageTransformerBlock``: ``img_norm1(img)`` modulated by the first half of ``img_mod(vec)``."""
    img, temb = args["img"], args["vec"]
    if temb.shape[0] != img.shape[0]:
        raise ValueError("a second timestep's modulation (reference latents, index_timestep_zero) is not in the "
                         "block patch's arguments")
    return block._modulate(block.img_norm1(img), block.img_mod(temb).chunk(2, dim=-1)[0])[0]


def ltxv(block, args: dict) -> torch.Tensor:
    """LTX-Video's block: ``rms_norm(x) * (1 + scale) + shift``, through its fused kernel where ComfyUI has one."""
    x, t = args["img"], args["vec"]
    table = block.scale_shift_table
    ada = (table[None, None, :2].to(device=x.device, dtype=x.dtype)
           + t.reshape(x.shape[0], t.shape[1], table.shape[0], -1)[:, :, :2, :])
    shift, scale = ada.unbind(dim=2)
    fused = getattr(getattr(comfy, "quant_ops", None), "ck", None)
    if fused is not None and not comfy.model_management.in_training:
        return fused.rms_adaln(x, scale, shift)
    return comfy.ldm.common_dit.rms_norm(x) * (1 + scale) + shift


def _given(conds: dict, key: str) -> list:
    """The values of ``key`` in every conditioning entry that has it."""
    return [entry[key] for entries in conds.values() for entry in entries or ()
            if isinstance(entry, dict) and key in entry]


def _refused(model: str, problem: str, fix: str) -> ValueError:
    return ValueError(
        f"SeaCache Apply's first-block gates read the first transformer block's input on {model}'s image tokens, but "
        f"{problem}. Use gate 'sea same-sigma' (or 'sea') for this run, or {fix}.")


def refuse_wan(diffusion_model, conds: dict) -> None:
    if getattr(diffusion_model, "ref_conv", None) is not None and _given(conds, "reference_latents"):
        raise _refused("Wan", "this model puts the reference latent's tokens before them",
                       "remove the reference latent")


def refuse_hunyuan_video(diffusion_model, conds: dict) -> None:
    if _given(conds, "ref_latent"):
        raise _refused("HunyuanVideo", "the reference latent's tokens come before them", "remove the reference latent")


def refuse_ltxv(diffusion_model, conds: dict) -> None:
    if _given(conds, "keyframe_idxs"):
        raise _refused("LTX-Video", "keyframe guides add latent frames to the video (LTXVAddGuide)",
                       "sample without the guides")


def _timestep_zero(default_method: Callable[[object], str | None]) -> Callable[[object, dict], None]:
    """The refusal of reference latents sampled with ``index_timestep_zero`` (per entry, else the model's default),
    whose second modulation the block's arguments do not carry."""

    def refuse(diffusion_model, conds: dict) -> None:
        default = default_method(diffusion_model)
        methods = [entry.get("reference_latents_method", default) for entries in conds.values()
                   for entry in entries or () if isinstance(entry, dict) and "reference_latents" in entry]
        if "index_timestep_zero" in methods:
            raise _refused(type(diffusion_model).__name__, "reference latents with the method index_timestep_zero "
                           "get a second timestep's modulation, which the first block's arguments do not carry",
                           "another reference_latents_method")

    return refuse


@dataclass(frozen=True)
class Family:
    """How a core model's first block is read, the patch of one token, and its conditioning check."""

    modulated: Callable[[torch.nn.Module, dict], torch.Tensor]
    patch: Callable[[object], tuple[int, int, int]]
    refuse: Callable[[object, dict], None]


def _square(model) -> tuple[int, int, int]:
    return (1, model.patch_size, model.patch_size)


FAMILIES = {
    ("comfy.ldm.wan.model", "WanModel"): Family(wan, lambda m: tuple(m.patch_size), refuse_wan),
    ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"): Family(double_stream, lambda m: tuple(m.patch_size),
                                                              refuse_hunyuan_video),
    ("comfy.ldm.flux.model", "Flux"): Family(
        double_stream, _square, _timestep_zero(lambda m: getattr(m.params, "default_ref_method", None))),
    ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"): Family(
        qwen_image, _square, _timestep_zero(lambda m: getattr(m, "default_ref_method", None))),
    ("comfy.ldm.lightricks.model", "LTXVModel"): Family(ltxv, lambda m: (1, 1, 1), refuse_ltxv),
}


def vision_grid(input_shape, patch: tuple[int, int, int]) -> tuple[int, int, int]:
    """The (T, H, W) token grid of a model input cut into ``patch``-sized tokens, partial patches padded."""
    sizes = (input_shape[2] if len(input_shape) == 5 else 1, *input_shape[-2:])
    return tuple(-(-int(n) // p) for n, p in zip(sizes, patch))


class BlockView:
    """One core model's first-block view as the first-block gates read it, ``[B, D, T, H, W]``."""

    def __init__(self, diffusion_model, family: Family, block: torch.nn.Module):
        self.diffusion_model, self.family, self.block = diffusion_model, family, block
        self.patch = family.patch(diffusion_model)

    def refuse(self, conds: dict) -> None:
        """ValueError for conditioning whose image tokens the view cannot place (run start)."""
        self.family.refuse(self.diffusion_model, conds)

    def __call__(self, args: dict, input_shape) -> torch.Tensor:
        """The view of the first block's patch arguments for a model input of ``input_shape``."""
        with torch.no_grad():
            modulated = self.family.modulated(self.block, args)
            return first_block_view(modulated, VisionTokens(vision_grid(input_shape, self.patch)))
