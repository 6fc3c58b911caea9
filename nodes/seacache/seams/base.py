"""The seam contract: what every seam provides to SeaCache's wrappers (:mod:`..hooks`), where the skippable stack
begins and ends inside the model and how to run it, and what of a gated call a seam may touch (:class:`SeamCall`).
Deciding, predicting and committing are the core's (``seacache_core.Call``)."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

WRAPPER_KEY = "seacache"
"""Key under which SeaCache registers its wrappers on a MODEL clone (``add_wrapper_with_key``)."""
CALL_OPTION = "seacache_call"
"""transformer_options key under which the current model call's :class:`SeamCall` reaches the seam."""
WINDOWED_STEP_OPTION = "seacache_windowed_step"
"""transformer_options key holding the step gated as one call over moving context windows
(``.context_windows.WindowedStep``), whose windows' model calls each get their own :class:`SeamCall`."""


@dataclass(frozen=True)
class RunStart:
    """What the sampling run hands a seam when it starts (``Seam.enter_run``): ``latent_channels``, the channels of
    the sampler's latent (concat conditioning follows them in the model input), and ``gate_windows(
    transformer_options, base_model, x_in, timestep, active, evaluate)``, which gates one step of moving context
    windows as one call: it calls ``evaluate(call)`` with the step's :class:`SeamCall`-giving call, or with None
    where the step runs plainly, and returns its result."""

    latent_channels: int
    gate_windows: Callable


def latent_numel(diffusion_model, input_shape) -> int:
    """Elements of one item of the sampler's latent (a residual taken on the whole model output)."""
    return math.prod(input_shape[1:])


def exact_class_entry(table: dict, obj):
    """The value of ``table`` (``(module, class name)`` -> value) for an object of exactly one of those classes, None
    for any other (subclasses add work a table's entry does not know; a class the running ComfyUI lacks is skipped)."""
    for (module, name), entry in table.items():
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if type(obj) is cls:
            return entry
    return None


def embedded_numel(embedding, input_shape) -> int:
    """Elements of one item's image stream after a patch embedding: a convolution makes one token per kernel-sized
    patch of the latent, a linear one token per ``in_features`` latent elements; each token is the embedding's
    output width."""
    if hasattr(embedding, "kernel_size"):
        tokens = math.prod(math.ceil(s / k) for s, k in zip(input_shape[2:], embedding.kernel_size))
        return tokens * embedding.out_channels
    return math.prod(input_shape[1:]) // embedding.in_features * embedding.out_features


def no_run_patches(model_options: dict, run: RunStart) -> None:
    """For seams whose hooks were all registered at Apply time: nothing to add at run start."""


def no_attach(patched) -> None:
    """For seams that need nothing on the MODEL clone itself (nor anything to remove from it)."""


def any_conditioning(conds: dict) -> None:
    """For seams whose first-block view places the vision tokens of every input the model takes."""


class SeamCall(Protocol):
    """All a seam may touch of a gated call: enter the stack with its input (the output to use instead of running
    it on a reused call, else None) and, where the seam reaches it, a function giving the first block's view (a
    first-block gate decides on it there), leave it with the computed output, and read whether the call reuses; run
    any other SeaCache step inside the model through ``guarded`` (a failure there falls back to the whole
    computation). A seam keeps any scratch state of its own (see ``block_stack``)."""

    stack_skipped: bool | None

    def enter(self, stack_in: torch.Tensor,
              block_view: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None: ...

    def leave(self, stack_out: torch.Tensor) -> None: ...

    def guarded(self, function, *args): ...


@dataclass(frozen=True)
class Seam:
    """Where SeaCache takes the residual of a model.

    ``name`` is shown by the Stats node. ``attach(patched)`` adds, at Apply time, what must live on the MODEL clone
    itself (object patches, inert outside a gated call). ``enter_run(model_options, run)`` registers the seam's run-time hooks in the
    run's private model options, at run start when every patch of the final MODEL is known (block-stack seams wrap
    the block patches other nodes added). ``bind(base_model, call)`` is a context manager that hands the call (a
    :class:`SeamCall`) to seams the call's ``transformer_options`` do not reach (None: they do). ``detach(patched)`` removes what
    ``attach`` added (an earlier SeaCache Apply on the same clone). ``residual_numel(diffusion_model, input_shape)`` is the
    element count of one item's residual, for the memory estimate. ``auto_order`` is the residual order SeaCache
    Apply's "auto" picks: 2 where it was measured better (the Cosmos3 architecture, README Quality), vLLM-Omni's 1
    elsewhere.

    ``refuse_view_conds`` is None where the seam cannot hand the first block's view to the call (the first-block
    gates are refused there, at Apply and at run start); else the seam enters the stack with it, and
    ``refuse_view_conds(conds)``
    raises ValueError at run start for sampler conditioning (``guider.conds``) whose tokens its view cannot place.
    The view of one item holds at most ``residual_numel`` elements (the stack input's image tokens)."""

    name: str
    residual_numel: Callable[[object, tuple], int] = latent_numel
    enter_run: Callable[[dict, RunStart], None] = no_run_patches
    bind: Callable | None = None
    attach: Callable[[object], None] = no_attach
    detach: Callable[[object], None] = no_attach
    auto_order: int = 1
    refuse_view_conds: Callable[[dict], None] | None = None
