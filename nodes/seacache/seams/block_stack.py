"""Block-stack seam for ComfyUI core models whose transformer blocks can be replaced through
``transformer_options["patches_replace"]["dit"]``: Wan 2.1/2.2 (``WanModel``), HunyuanVideo, LTX-Video
(``LTXVModel``), LTX-2 (``LTXAVModel``: its blocks carry the video and the audio tokens together; the residual
covers both), Flux and Qwen-Image.

The residual is taken over the whole stack: from the image stream entering the first block to the image stream
leaving the last one. Models with double-stream blocks followed by single-stream blocks (Flux, HunyuanVideo)
join text and image tokens before the single blocks, in an order that differs between models and ComfyUI
versions, so the image tokens are located in the joint stream on every computed call (they are the double
stack's image output, unchanged by the join). On a reused call the first block returns its input plus the
extrapolated residual and every other block passes its input through, so no block runs.

The block patches are placed at run start, when every patch of the final MODEL is known: a block another node
replaces (``patches_replace["dit"]``, before or after SeaCache Apply) keeps its patch, which SeaCache's patch
calls on computed calls and skips with the stack on reused ones. Only the exact classes listed are patched:
subclasses (VACE, camera, S2V, HuMo ...) add work between blocks and fall back to the diffusion-model seam.

What these models add between blocks, outside the block-replace patches, is part of the stack too: ControlNet
residuals (the ``control`` argument: ``"input"`` after double blocks, ``"output"`` after single blocks) and
``transformer_options["patches"]["double_block"]`` model patches (DiffSynth ControlNets and the like). The
residual a computed call records contains them, up to the last block's output; the last block's own entries come
after it. So on a reused call :class:`StackInputs` lets only the last block's entries through: each counts once.

Where :mod:`.first_block_inputs` knows the model's first block, the first block's patch also hands the call the
first block's view of the image tokens (first-block gates decide on it there).
"""

from __future__ import annotations

import functools
import math

import comfy.patcher_extension
import torch

from . import first_block_inputs
from .base import CALL_OPTION, WRAPPER_KEY, Seam, SeamCall, exact_class_entry

# (module, class name) -> (the block stacks in execution order: (patch kind, attribute holding the blocks),
#                          the image patch embedding, whose shape gives the residual's tokens and width)
FAMILIES = {
    ("comfy.ldm.wan.model", "WanModel"): ((("double_block", "blocks"),), "patch_embedding"),
    ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"): ((("double_block", "double_blocks"), ("single_block", "single_blocks")), "img_in.proj"),
    ("comfy.ldm.lightricks.model", "LTXVModel"): ((("double_block", "transformer_blocks"),), "patchify_proj"),
    ("comfy.ldm.lightricks.av_model", "LTXAVModel"): ((("double_block", "transformer_blocks"),), "patchify_proj"),
    ("comfy.ldm.flux.model", "Flux"): ((("double_block", "double_blocks"), ("single_block", "single_blocks")), "img_in"),
    ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"): ((("double_block", "transformer_blocks"),), "img_in"),
}
CONTROL_KINDS = {"input": "double_block", "output": "single_block"}
"""``control`` lists of per-block residuals -> the kind of block each entry is added after."""
PATCH_KINDS = ("double_block",)
"""``transformer_options["patches"]`` lists these models call after each block of that kind."""
SCRATCH_OPTION = "seacache_block_scratch"
"""transformer_options key of the :class:`BlockScratch` of the current gated call."""


def embedded_numel(embedding, input_shape) -> int:
    """Elements of one item's image stream after a patch embedding: a convolution makes one token per kernel-sized
    patch of the latent, a linear one token per ``in_features`` latent elements; each token is the embedding's
    output width."""
    if hasattr(embedding, "kernel_size"):
        tokens = math.prod(math.ceil(s / k) for s, k in zip(input_shape[2:], embedding.kernel_size))
        return tokens * embedding.out_channels
    return math.prod(input_shape[1:]) // embedding.in_features * embedding.out_features


def _passthrough(args: dict) -> dict:
    """A block's output that leaves its streams as they came in."""
    return {key: args[key] for key in ("img", "txt") if key in args}


class BlockScratch:
    """What the block seam carries from block to block within one gated call: the model input's shape
    (``input_shape``, the image tokens' grid), where the image tokens sit in the joint text+image stream
    (``image_slice``; None: the whole stream), the image stream leaving the double-stream blocks (``double_out``), and
    whether the image tokens were lost in the join (``image_lost``: the call then runs whole and is not committed)."""

    def __init__(self, input_shape: torch.Size):
        self.input_shape = input_shape
        self.image_slice: slice | None = None
        self.double_out: torch.Tensor | None = None
        self.image_lost = False


class BlockPatch:
    """Replacement of one block of the stack. ``first``/``last`` mark the stack's ends; ``joins`` marks the first
    single-stream block after double-stream ones (where the image tokens are located in the joint stream).
    ``inner`` is the patch another node placed on this block (None: the block itself), run wherever the block
    would run. ``first_block`` (the first block's patch, where the model's first block is known) gives the call
    the first block's view."""

    def __init__(self, first: bool, last: bool, joins: bool, double_end: bool, inner=None,
                 first_block: first_block_inputs.FirstBlockView | None = None):
        self.first, self.last, self.joins, self.double_end, self.inner = first, last, joins, double_end, inner
        self.first_block = first_block

    def run_block(self, args: dict, extra: dict) -> dict:
        """The block, through the other node's patch when there is one."""
        return extra["original_block"](args) if self.inner is None else self.inner(args, extra)

    # Never traced by torch.compile (the block it runs still is): a compile that ignores changes to
    # transformer_options (KJNodes' TorchCompileModelAdvanced filters out those guards) would otherwise replay
    # one call's verdict on later calls, from inside the model.
    @torch.compiler.disable(recursive=False)
    def __call__(self, args: dict, extra: dict) -> dict:
        options = args.get("transformer_options") or {}
        call: SeamCall | None = options.get(CALL_OPTION)
        scratch: BlockScratch | None = options.get(SCRATCH_OPTION)
        if call is None or scratch is None:
            return self.run_block(args, extra)
        if self.first:
            view = None if self.first_block is None else functools.partial(self.first_block, args, scratch.input_shape)
            predicted = call.enter(joined(args["img"]), view)
            scratch.image_slice = None
            if predicted is not None:
                return {**_passthrough(args), "img": split_like(predicted, args["img"])}
            img = args["img"]  # the recorded stack input: some blocks add to theirs in place
            args = {**args, "img": img.clone() if isinstance(img, torch.Tensor) else tuple(s.clone() for s in img)}
        elif call.reusing:
            return _passthrough(args)
        if self.joins:
            scratch.image_slice = _locate(args["img"], scratch.double_out)
            scratch.image_lost = scratch.image_slice is None
            scratch.double_out = None
        out = self.run_block(args, extra)
        if self.double_end and not self.last:
            scratch.double_out = out["img"]
        if self.last and not scratch.image_lost:
            image = out["img"] if scratch.image_slice is None else out["img"][:, scratch.image_slice]
            call.leave(joined(image))
        return out


def joined(streams) -> torch.Tensor:
    """One tensor per item of a block stream: the tensor itself, or for joint audio-video blocks (LTX-2: the pair
    (video tokens, audio tokens)) both streams flattened per item and concatenated, so the residual covers both."""
    if isinstance(streams, torch.Tensor):
        return streams
    return torch.cat([s.reshape(s.shape[0], -1) for s in streams], dim=1)


def split_like(flat: torch.Tensor, streams):
    """Inverse of :func:`joined` for streams shaped like ``streams``."""
    if isinstance(streams, torch.Tensor):
        return flat
    sizes = [s[0].numel() for s in streams]
    return tuple(part.reshape(s.shape) for part, s in zip(flat.split(sizes, dim=1), streams))


def _locate(joint: torch.Tensor, image: torch.Tensor | None) -> slice | None:
    """Where the double stack's image tokens sit in the joint text+image stream (first or last tokens); None when
    they are not found there (the call then runs whole and is not committed)."""
    if image is None:
        return None
    n = image.shape[1]
    first, last = slice(0, n), slice(joint.shape[1] - n, joint.shape[1])
    matches = torch.stack([(joint[:, first] == image).all(), (joint[:, last] == image).all()]).tolist()  # one host read
    if matches[0]:
        return first
    if matches[1]:
        return last
    return None


class StackEntries(list):
    """A ``control`` list of per-block residuals; on a reused call, entries of blocks inside the skipped stack read
    as None (the model then adds nothing there), only ``keep``'s (the stack's last block) still counts."""

    def __init__(self, entries, call: SeamCall, keep: int | None):
        super().__init__(entries)
        self.call, self.keep = call, keep

    def __getitem__(self, index):
        if self.call.reusing and isinstance(index, int) and index != self.keep:
            return None
        return super().__getitem__(index)


class StackPatch:
    """A block model patch that, on a reused call, passes the streams through except after block ``keep``."""

    def __init__(self, patch, call: SeamCall, keep: int | None):
        self.patch, self.call, self.keep = patch, call, keep

    def __call__(self, args: dict) -> dict:
        if self.call.reusing and args.get("block_index") != self.keep:
            return args
        return self.patch(args)


class StackInputs:
    """APPLY_MODEL wrapper inside SeaCache's gate: gives each gated call its :class:`BlockScratch` and hands the
    model ``control`` and block patches that count once on a reused call (see the module docstring); ``last`` is
    the stack's last block ``(kind, number)``."""

    def __init__(self, last: tuple[str, int]):
        self.last = last

    def _keep(self, kind: str) -> int | None:
        return self.last[1] if kind == self.last[0] else None

    def __call__(self, executor, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
        call: SeamCall | None = transformer_options.get(CALL_OPTION)
        if call is None:
            return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
        transformer_options = {**transformer_options, SCRATCH_OPTION: BlockScratch(x.shape)}
        if isinstance(control, dict):
            control = {key: StackEntries(entries, call, self._keep(CONTROL_KINDS[key]))
                       if key in CONTROL_KINDS and entries is not None else entries for key, entries in control.items()}
        patches = transformer_options.get("patches", {})
        if any(kind in patches for kind in PATCH_KINDS):
            gated = {kind: [StackPatch(p, call, self._keep(kind)) for p in patches[kind]] for kind in PATCH_KINDS if kind in patches}
            transformer_options = {**transformer_options, "patches": {**patches, **gated}}
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)


def _blocks(diffusion_model, stacks) -> list[tuple[str, int]]:
    return [(kind, i) for kind, attr in stacks for i in range(len(getattr(diffusion_model, attr)))]


def seam_for(model_patcher, model_options: dict) -> Seam | None:
    """The block-stack seam for a supported core model, None otherwise."""
    diffusion_model = getattr(getattr(model_patcher, "model", None), "diffusion_model", None)
    family = exact_class_entry(FAMILIES, diffusion_model)
    if family is None:
        return None
    stacks, embedding = family
    blocks = _blocks(diffusion_model, stacks)
    if not blocks:
        return None
    reads = exact_class_entry(first_block_inputs.FAMILIES, diffusion_model)
    first_stack = getattr(diffusion_model, stacks[0][1])
    view = None
    if reads is not None and len(first_stack):
        view = first_block_inputs.FirstBlockView(diffusion_model, reads, first_stack[0])
    double_count = sum(kind == "double_block" for kind, _ in blocks)
    has_single = double_count < len(blocks)

    def enter_run(run_options: dict) -> None:
        """Place SeaCache's patch on every block of the run's options, wrapping the patch another node put there."""
        replaced = run_options.setdefault("transformer_options", {}).setdefault("patches_replace", {}).setdefault("dit", {})
        for index, key in enumerate(blocks):
            replaced[key] = BlockPatch(
                first=index == 0,
                last=index == len(blocks) - 1,
                joins=has_single and double_count > 0 and index == double_count,
                double_end=has_single and index == double_count - 1,
                inner=replaced.get(key),
                first_block=view if index == 0 else None,
            )
        # registered after SeaCache's gate (the MODEL's wrappers come first in the run's options): runs inside it
        comfy.patcher_extension.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.APPLY_MODEL, WRAPPER_KEY,
                                                     StackInputs(blocks[-1]), run_options, is_model_options=True)

    def residual_numel(model, input_shape) -> int:
        return embedded_numel(model.get_submodule(embedding), input_shape)

    name = f"block stack ({type(diffusion_model).__name__}, {len(blocks)} blocks)"
    return Seam(name, residual_numel, enter_run, first_block=None if view is None else view.refuse)
