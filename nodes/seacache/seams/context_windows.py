"""Moving context windows: the gate decides once per step on the full latent, and each window's model call enters the
model's own seam through a :class:`WindowView` of its rows and frames (docs/any-model.md); the run's context handler is
wrapped in its private options."""

from __future__ import annotations

from dataclasses import replace

import torch

from ....seacache_core import Call
from .base import WINDOWED_STEP_OPTION, RunStart, Seam

HANDLER = "context_handler"
STATIC_SCHEDULES = ("standard_static", "batched")  # schedules whose windows never move


def _frames_of(window, handler, x: torch.Tensor, full: torch.Tensor) -> list[int] | None:
    """The frame of ``full`` behind each latent frame of the window's input, as the handler sliced it; None when the
    input is no temporal slice of ``full``."""
    index_list = getattr(window, "index_list", None)
    if index_list is None or getattr(handler, "dim", None) != 2 or x.ndim != 5 or x.shape[1] != full.shape[1] \
            or x.shape[3:] != full.shape[3:]:
        return None
    anchor = getattr(window, "causal_anchor_index", None)
    frames = ([anchor] if anchor is not None and anchor >= 0 else []) + [int(i) for i in index_list]
    for position in getattr(handler, "latent_retain_index_list", None) or ():
        if 0 <= position < len(frames):
            frames[position] = position
    if len(frames) != x.shape[2] or not all(0 <= f < full.shape[2] for f in frames):
        return None
    return frames


def _per_frame(t: torch.Tensor, frames: int) -> torch.Tensor:
    """``[n, frames, features]`` of a stack tensor: frame-major tokens or a latent ``[n, C, frames, H, W]``."""
    if t.ndim == 5:
        return t.movedim(2, 1).reshape(t.shape[0], frames, -1)
    return t.reshape(t.shape[0], frames, -1)


def _like(per_frame: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`_per_frame` into ``like``'s shape."""
    if like.ndim == 5:
        n, c, t, h, w = like.shape
        return per_frame.reshape(n, t, c, h, w).movedim(1, 2)
    return per_frame.reshape(like.shape)


class WindowedStep:
    """One step's gated call spread over its windows."""

    def __init__(self, call: Call, handler, full: torch.Tensor, active: list[int]):
        self.call, self.handler, self.full, self.active = call, handler, full, active
        self.stack_skipped: bool | None = None
        self.predicted: torch.Tensor | None = None  # [items, frames, features]
        self.total: torch.Tensor | None = None
        self.count: torch.Tensor | None = None
        self.missed = False

    def view(self, transformer_options: dict, x: torch.Tensor) -> WindowView | None:
        """The view a window's call enters with; None where its rows or frames do not map (no commit)."""
        frames = _frames_of(transformer_options.get("context_window"), self.handler, x, self.full)
        chunks = transformer_options.get("cond_or_uncond") or [0]
        per_chunk = x.shape[0] // len(chunks)
        if frames is None or any(c not in self.active for c in chunks) or per_chunk * len(chunks) != x.shape[0]:
            self.missed = True
            return None
        batch = self.full.shape[0]
        rows = [self.active.index(c) * batch + item % batch for c in chunks for item in range(per_chunk)]
        return WindowView(self, rows, frames)

    def start(self, stack_in: torch.Tensor, frames: int) -> bool:
        """Whether the step reuses, decided at the first window, which predicts the step's residual."""
        if self.stack_skipped is None:
            self.stack_skipped = False
            features = _per_frame(stack_in[:1], frames).shape[2]
            items, full_frames = len(self.active) * self.full.shape[0], self.full.shape[2]
            if self.call.verdict.reuse:
                predicted = self.call.run.predict(self.call.verdict, stack_in.new_empty((items, full_frames * features)))
                if predicted is not None:
                    self.stack_skipped = True
                    self.predicted = predicted.reshape(items, full_frames, features)
            if not self.stack_skipped:
                self.total = stack_in.new_zeros((items, full_frames, features))
                self.count = stack_in.new_zeros((items, full_frames, 1))
        return self.stack_skipped

    def add(self, rows: list[int], frames: list[int], residual: torch.Tensor) -> None:
        """Accumulate one window's residual ``[rows, frames, features]`` into the step's frames."""
        index = (torch.tensor(rows, device=residual.device)[:, None], torch.tensor(frames, device=residual.device)[None, :])
        self.total.index_put_(index, residual.to(self.total.dtype), accumulate=True)
        self.count.index_put_(index, torch.ones_like(residual[..., :1], dtype=self.count.dtype), accumulate=True)

    def finish(self) -> None:
        """Commit the step's residual, each frame's windows averaged, when every window and frame took part."""
        if self.stack_skipped or self.total is None or self.missed or self.call.failure is not None \
                or bool((self.count == 0).any()):
            return
        self.call.run.commit(self.call.verdict, (self.total / self.count).reshape(self.total.shape[0], -1))


class WindowView:
    """One window's call as its seam sees it (:class:`.base.SeamCall`)."""

    def __init__(self, windowed: WindowedStep, rows: list[int], frames: list[int]):
        self.windowed, self.rows, self.frames = windowed, rows, frames
        self.stack_skipped: bool | None = None
        self.row = 0
        self.inputs: list[tuple[list[int], torch.Tensor]] = []

    def guarded(self, function, *args):
        """``function(*args)`` under the step's call's guard."""
        return self.windowed.call.guarded(function, *args)

    def enter(self, stack_in: torch.Tensor, block_view=None) -> torch.Tensor | None:
        """The window's frames of the predicted output on a reused step, else None."""
        return self.guarded(self._enter, stack_in)

    def _enter(self, stack_in: torch.Tensor) -> torch.Tensor | None:
        self.stack_skipped = self.windowed.start(stack_in, len(self.frames))
        rows = self.rows[self.row : self.row + stack_in.shape[0]]
        self.row += stack_in.shape[0]
        if not self.stack_skipped:
            self.inputs.append((rows, stack_in))
            return None
        residual = self.windowed.predicted[rows][:, self.frames]
        return stack_in + _like(residual, stack_in).to(stack_in.dtype)

    def leave(self, stack_out: torch.Tensor) -> None:
        """Add the window's computed residual to the step."""
        self.guarded(self._leave, stack_out)

    def _leave(self, stack_out: torch.Tensor) -> None:
        rows, stack_in = self.inputs.pop(0)
        self.windowed.add(rows, self.frames, _per_frame(stack_out - stack_in, len(self.frames)))


class GatedContextHandler:
    """A context handler whose step of windows is one gated call (``gate_windows``, the run's)."""

    def __init__(self, handler, gate_windows):
        object.__setattr__(self, "handler", handler)
        object.__setattr__(self, "gate_windows", gate_windows)

    def __getattr__(self, name):
        return getattr(self.handler, name)

    def __setattr__(self, name, value):
        setattr(self.handler, name, value)

    def execute(self, calc_cond_batch, model, conds, x_in, timestep, model_options):
        """Every window evaluated as usual, their stacks gated as one call per step."""
        options = model_options.get("transformer_options", {})
        if WINDOWED_STEP_OPTION in options:
            return self.handler.execute(calc_cond_batch, model, conds, x_in, timestep, model_options)
        active = [i for i, cond in enumerate(conds) if cond is not None]

        def evaluate(call: Call | None):
            if call is None:
                return self.handler.execute(calc_cond_batch, model, conds, x_in, timestep, model_options)
            step = WindowedStep(call, self.handler, x_in, active)
            inner = {**model_options, "transformer_options": {**options, WINDOWED_STEP_OPTION: step}}
            outs = self.handler.execute(calc_cond_batch, model, conds, x_in, timestep, inner)
            call.guarded(step.finish)
            return outs

        return self.gate_windows(options, model, x_in, timestep, active, evaluate)


def refuse_block_view(conds: dict) -> None:
    """The first-block gates' run-start check under moving windows: always refused."""
    raise ValueError(
        "SeaCache Apply's first-block gates decide each model call on the first transformer block's input, but with "
        "moving context windows each model call sees one window of the video while SeaCache decides a step once for "
        "all of them. Use gate 'sea same-sigma' (or 'sea'), or a static context schedule (standard_static).")


def around(seam: Seam, model_options: dict) -> Seam:
    """``seam`` gated per step of moving windows when the run samples with them, else ``seam``."""
    handler = model_options.get(HANDLER)
    if handler is None or getattr(getattr(handler, "context_schedule", None), "name", None) in STATIC_SCHEDULES:
        return seam

    def enter_run(run_options: dict, run: RunStart) -> None:
        seam.enter_run(run_options, run)
        run_options[HANDLER] = GatedContextHandler(run_options[HANDLER], run.gate_windows)

    return replace(seam, name=f"{seam.name}, per step of moving context windows", enter_run=enter_run,
                   refuse_view_conds=None if seam.refuse_view_conds is None else refuse_block_view)
