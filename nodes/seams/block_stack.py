"""Block-stack seam for ComfyUI core models whose transformer blocks can be replaced through
``transformer_options["patches_replace"]["dit"]``: Wan 2.1/2.2 (``WanModel``), HunyuanVideo, LTX-Video
(``LTXVModel``), Flux and Qwen-Image.

The residual is taken over the whole stack: from the image stream entering the first block to the image stream
leaving the last one. Models with double-stream blocks followed by single-stream blocks (Flux, HunyuanVideo)
join text and image tokens before the single blocks, in an order that differs between models and ComfyUI
versions, so the image tokens are located in the joint stream on every computed call (they are the double
stack's image output, unchanged by the join). On a reused call the first block returns its input plus the
extrapolated residual and every other block passes its input through, so no block runs.

Only the exact classes listed are patched: subclasses (VACE, camera, S2V, HuMo ...) add work between blocks
and fall back to the diffusion-model seam, as do models whose blocks another node already replaces.
"""

from __future__ import annotations

import importlib

import torch

from .base import Seam, install_apply_gate
from .call import CALL_KEY, StackCall

# (module, class name) -> the block stacks in execution order: (patch kind, attribute holding the blocks)
FAMILIES = {
    ("comfy.ldm.wan.model", "WanModel"): (("double_block", "blocks"),),
    ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"): (("double_block", "double_blocks"), ("single_block", "single_blocks")),
    ("comfy.ldm.lightricks.model", "LTXVModel"): (("double_block", "transformer_blocks"),),
    ("comfy.ldm.flux.model", "Flux"): (("double_block", "double_blocks"), ("single_block", "single_blocks")),
    ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"): (("double_block", "transformer_blocks"),),
}


def _family(diffusion_model):
    """The block stacks of a supported exact class, None otherwise."""
    for (module, name), stacks in FAMILIES.items():
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if type(diffusion_model) is cls:
            return stacks
    return None


def _passthrough(args: dict) -> dict:
    """A block's output that leaves its streams as they came in."""
    return {key: args[key] for key in ("img", "txt") if key in args}


class BlockPatch:
    """Replacement of one block of the stack. ``first``/``last`` mark the stack's ends; ``joins`` marks the first
    single-stream block after double-stream ones (where the image tokens are located in the joint stream)."""

    def __init__(self, first: bool, last: bool, joins: bool, double_end: bool):
        self.first, self.last, self.joins, self.double_end = first, last, joins, double_end

    def __call__(self, args: dict, extra: dict) -> dict:
        call: StackCall | None = (args.get("transformer_options") or {}).get(CALL_KEY)
        original = extra["original_block"]
        if call is None:
            return original(args)
        if self.first:
            predicted = call.enter(args["img"])
            call.image_slice = None
            if predicted is not None:
                return {**_passthrough(args), "img": predicted}
        elif call.reusing:
            return _passthrough(args)
        if self.joins:
            call.image_slice = _locate(args["img"], call.double_out)
            call.double_out = None
        out = original(args)
        if self.double_end and not self.last:
            call.double_out = out["img"]
        if self.last:
            image = out["img"] if call.image_slice is None else out["img"][:, call.image_slice]
            call.leave(image)
        return out


def _locate(joint: torch.Tensor, image: torch.Tensor) -> slice:
    """Where the double stack's image tokens sit in the joint text+image stream (first or last tokens)."""
    n = image.shape[1]
    first, last = slice(0, n), slice(joint.shape[1] - n, joint.shape[1])
    matches = torch.stack([(joint[:, first] == image).all(), (joint[:, last] == image).all()]).tolist()  # one host read
    if matches[0]:
        return first
    if matches[1]:
        return last
    raise RuntimeError("SeaCache: cannot find the image tokens in the joint stream of the single-stream blocks.")


def _blocks(diffusion_model, stacks) -> list[tuple[str, int]]:
    return [(kind, i) for kind, attr in stacks for i in range(len(getattr(diffusion_model, attr)))]


def plan(model) -> Seam | None:
    """The block-stack seam for a supported core model whose blocks nobody else replaces, None otherwise."""
    diffusion_model = getattr(getattr(model, "model", None), "diffusion_model", None)
    stacks = _family(diffusion_model)
    if stacks is None:
        return None
    blocks = _blocks(diffusion_model, stacks)
    replaced = model.model_options.get("transformer_options", {}).get("patches_replace", {}).get("dit", {})
    if not blocks or any(key in replaced for key in blocks):
        return None
    name = f"block stack ({type(diffusion_model).__name__}, {len(blocks)} blocks)"
    double_count = sum(kind == "double_block" for kind, _ in blocks)
    has_single = double_count < len(blocks)

    def install(patched) -> None:
        for index, (kind, number) in enumerate(blocks):
            patch = BlockPatch(
                first=index == 0,
                last=index == len(blocks) - 1,
                joins=has_single and double_count > 0 and index == double_count,
                double_end=has_single and index == double_count - 1,
            )
            patched.set_model_patch_replace(patch, "dit", kind, number)
        install_apply_gate(patched, name)

    return Seam(name, install)


def remove(patched) -> None:
    """Drop the block patches an earlier SeaCache Apply left on this (cloned) MODEL."""
    replaced = patched.model_options.get("transformer_options", {}).get("patches_replace", {}).get("dit", {})
    for key in [k for k, v in replaced.items() if isinstance(v, BlockPatch)]:
        del replaced[key]
