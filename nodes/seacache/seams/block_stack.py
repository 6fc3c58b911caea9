"""The block-stack seam of ComfyUI's core models with ``patches_replace["dit"]`` blocks (exact classes only): the
residual runs from the image stream entering the first block to the one leaving the last; a reused call runs no block,
and lets ControlNet entries and block patches through once (docs/any-model.md)."""

from __future__ import annotations

import functools

import comfy.patcher_extension
import torch

from . import block_views
from .base import CALL_OPTION, WRAPPER_KEY, RunStart, Seam, SeamCall, embedded_numel, exact_class_entry

# (module, class) -> ((patch kind, block list attribute) in execution order, the image patch embedding)
FAMILIES = {
    ("comfy.ldm.wan.model", "WanModel"): ((("double_block", "blocks"),), "patch_embedding"),
    ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"): ((("double_block", "double_blocks"), ("single_block", "single_blocks")), "img_in.proj"),
    ("comfy.ldm.lightricks.model", "LTXVModel"): ((("double_block", "transformer_blocks"),), "patchify_proj"),
    ("comfy.ldm.lightricks.av_model", "LTXAVModel"): ((("double_block", "transformer_blocks"),), "patchify_proj"),
    ("comfy.ldm.flux.model", "Flux"): ((("double_block", "double_blocks"), ("single_block", "single_blocks")), "img_in"),
    ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"): ((("double_block", "transformer_blocks"),), "img_in"),
}
SHIFT_WARMUP = {("comfy.ldm.wan.model", "WanModel"): True}
CONTROL_KINDS = {"input": "double_block", "output": "single_block"}  # control list -> the blocks it follows
PATCH_KINDS = ("double_block",)  # transformer_options["patches"] these models call after blocks
SCRATCH_OPTION = "seacache_block_scratch"


def _passthrough(args: dict) -> dict:
    """A block's output that leaves its streams as they came in."""
    return {key: args[key] for key in ("img", "txt") if key in args}


class BlockScratch:
    """What a gated call carries from block to block: input shape, the image tokens' place in the joint stream, the
    double stack's output, and whether the join lost them (the call then runs whole)."""

    def __init__(self, input_shape: torch.Size):
        self.input_shape = input_shape
        self.image_slice: slice | None = None
        self.double_out: torch.Tensor | None = None
        self.image_lost = False


class BlockPatch:
    """One block's replacement: ``first``/``last`` end the stack, ``joins`` opens the single stream, ``inner`` is
    another node's patch, ``view`` the first block's view."""

    def __init__(self, first: bool, last: bool, joins: bool, double_end: bool, inner=None,
                 view: block_views.BlockView | None = None):
        self.first, self.last, self.joins, self.double_end, self.inner = first, last, joins, double_end, inner
        self.view = view

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
            view = None if self.view is None else functools.partial(self.view, args, scratch.input_shape)
            predicted = call.enter(joined(args["img"]), view)
            scratch.image_slice = None
            if predicted is not None:
                return {**_passthrough(args), "img": split_like(predicted, args["img"])}
            img = args["img"]  # some blocks add to their input in place
            args = {**args, "img": img.clone() if isinstance(img, torch.Tensor) else tuple(s.clone() for s in img)}
        elif call.stack_skipped:
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
    """One tensor per item of a block stream (LTX-2's video and audio token streams flattened and joined)."""
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
    """Where the double stack's image tokens sit in the joint stream (first or last tokens), None when absent."""
    if image is None:
        return None
    n = image.shape[1]
    first, last = slice(0, n), slice(joint.shape[1] - n, joint.shape[1])
    matches = torch.stack([(joint[:, first] == image).all(), (joint[:, last] == image).all()]).tolist()
    if matches[0]:
        return first
    if matches[1]:
        return last
    return None


class StackEntries(list):
    """A ``control`` list whose entries inside a skipped stack read as None; ``keep`` (the last block) counts."""

    def __init__(self, entries, call: SeamCall, keep: int | None):
        super().__init__(entries)
        self.call, self.keep = call, keep

    def __getitem__(self, index):
        if self.call.stack_skipped and isinstance(index, int) and index != self.keep:
            return None
        return super().__getitem__(index)


class StackPatch:
    """A block model patch that, on a reused call, passes the streams through except after block ``keep``."""

    def __init__(self, patch, call: SeamCall, keep: int | None):
        self.patch, self.call, self.keep = patch, call, keep

    def __call__(self, args: dict) -> dict:
        if self.call.stack_skipped and args.get("block_index") != self.keep:
            return args
        return self.patch(args)


class StackInputs:
    """``APPLY_MODEL`` wrapper inside the gate: each call's scratch, and ``control`` entries and block patches that
    count once on a reused call."""

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


def seam_for(model_patcher) -> Seam | None:
    """The block-stack seam for a supported core model, None otherwise."""
    diffusion_model = getattr(getattr(model_patcher, "model", None), "diffusion_model", None)
    family = exact_class_entry(FAMILIES, diffusion_model)
    if family is None:
        return None
    stacks, embedding = family
    blocks = _blocks(diffusion_model, stacks)
    if not blocks:
        return None
    reads = exact_class_entry(block_views.FAMILIES, diffusion_model)
    first_stack = getattr(diffusion_model, stacks[0][1])
    view = None
    if reads is not None and len(first_stack):
        view = block_views.BlockView(diffusion_model, reads, first_stack[0])
    double_count = sum(kind == "double_block" for kind, _ in blocks)
    has_single = double_count < len(blocks)

    def enter_run(run_options: dict, run: RunStart) -> None:
        """Patch every block in the run's options, wrapping another node's patch; StackInputs is added after SeaCache's
        gate, so it runs inside it."""
        replaced = run_options.setdefault("transformer_options", {}).setdefault("patches_replace", {}).setdefault("dit", {})
        for index, key in enumerate(blocks):
            replaced[key] = BlockPatch(
                first=index == 0,
                last=index == len(blocks) - 1,
                joins=has_single and double_count > 0 and index == double_count,
                double_end=has_single and index == double_count - 1,
                inner=replaced.get(key),
                view=view if index == 0 else None,
            )
        comfy.patcher_extension.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.APPLY_MODEL, WRAPPER_KEY,
                                                     StackInputs(blocks[-1]), run_options, is_model_options=True)

    def residual_numel(model, input_shape) -> int:
        return embedded_numel(model.get_submodule(embedding), input_shape)

    name = f"block stack ({type(diffusion_model).__name__}, {len(blocks)} blocks)"
    auto_warmup = None if exact_class_entry(SHIFT_WARMUP, diffusion_model) else 1
    return Seam(name, residual_numel, enter_run, auto_warmup=auto_warmup,
                refuse_view_conds=None if view is None else view.refuse)
