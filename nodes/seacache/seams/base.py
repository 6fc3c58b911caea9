"""The seam contract: where a model's skippable stack begins and ends and how it runs (:class:`Seam`), and what of a
gated call a seam may touch (:class:`SeamCall`); deciding, predicting and committing are the core's."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import torch

WRAPPER_KEY = "seacache"  # of every wrapper SeaCache registers
CALL_OPTION = "seacache_call"  # transformer_options key: the model call's SeamCall
WINDOWED_STEP_OPTION = "seacache_windowed_step"  # transformer_options key: a step over moving windows


@dataclass(frozen=True)
class RunStart:
    """What a seam receives when the run starts: the sampler latent's channel count, and ``gate_windows``, which gates a
    step of moving context windows as one call (``evaluate(call)``; ``call`` None: plainly)."""

    latent_channels: int
    gate_windows: Callable


def latent_numel(diffusion_model, input_shape) -> int:
    """Elements of one item of the sampler's latent."""
    return math.prod(input_shape[1:])


def exact_class_entry(table: dict, obj):
    """``table``'s entry for an object of exactly one of its classes, else None (a subclass adds work)."""
    for (module, name), entry in table.items():
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        if type(obj) is cls:
            return entry
    return None


def embedded_numel(embedding, input_shape) -> int:
    """Elements of one item's image stream after a patch embedding (convolution or linear)."""
    if hasattr(embedding, "kernel_size"):
        tokens = math.prod(math.ceil(s / k) for s, k in zip(input_shape[2:], embedding.kernel_size))
        return tokens * embedding.out_channels
    return math.prod(input_shape[1:]) // embedding.in_features * embedding.out_features


def no_run_patches(model_options: dict, run: RunStart) -> None:
    """Nothing to add at run start."""


def no_attach(patched) -> None:
    """Nothing on the MODEL clone itself."""


def any_conditioning(conds: dict) -> None:
    """A first-block view that places the vision tokens of every input the model takes."""


class SeamCall(Protocol):
    """All a seam may touch of a gated call: ``enter`` the stack (the output on a reused call, else None; a
    ``block_view`` where the seam reaches it), ``leave`` it, ``stack_skipped``, and ``guarded`` for its own steps."""

    stack_skipped: bool | None

    def enter(self, stack_in: torch.Tensor,
              block_view: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None: ...

    def leave(self, stack_out: torch.Tensor) -> None: ...

    def guarded(self, function, *args): ...


@dataclass(frozen=True)
class Seam:
    """Where SeaCache takes a model's residual: ``attach``/``detach`` what lives on the MODEL clone (at Apply),
    ``enter_run`` the run-time hooks in the run's options, ``bind`` a call to a stack no option reaches,
    ``residual_numel`` for the memory estimate, ``auto_order``/``auto_warmup`` for "auto" (warm-up None: the
    shift's), ``refuse_view_conds`` (None: no first-block view)."""

    name: str
    residual_numel: Callable[[object, tuple], int] = latent_numel
    enter_run: Callable[[dict, RunStart], None] = no_run_patches
    bind: Callable | None = None
    attach: Callable[[object], None] = no_attach
    detach: Callable[[object], None] = no_attach
    auto_order: int = 1
    auto_warmup: int | None = 1
    refuse_view_conds: Callable[[dict], None] | None = None
