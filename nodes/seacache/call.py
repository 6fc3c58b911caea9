"""One gated model call seen from the seam: the stack is entered (maybe in row groups) and left, and the
residual ``stack_out - stack_in`` is committed once every row of the call's batch has passed. The protocol itself
(predict or commit, discard) is the core's :class:`~seacache_core.call.GatedCall`."""

from __future__ import annotations

import torch

from ...seacache_core import GatedCall

CALL_OPTION = "seacache_call"
"""transformer_options key under which the SeaCache runtime hands the current call to the seam."""
RUN_OPTION = "seacache_run"
"""transformer_options key holding the SeaCache run (``nodes.seacache.runtime.SeaCacheRun``) during sampling."""


def branch_key(conditioning: str, item: int, window: str | None = None) -> str:
    """The stable name of one gate branch in reports: its conditioning ("cond0", "uncond0", "cond1"...), the item
    within it and, under static context windows, the window ("cond0/0@w1")."""
    return f"{conditioning}/{item}" if window is None else f"{conditioning}/{item}@{window}"


class Guarded:
    """Runs SeaCache's own steps inside someone else's forward: the first exception is kept in ``failure`` and every
    later step does nothing, so the model's own code computes instead and SeaCache never raises there (the runtime
    then computes the rest of the run whole)."""

    failure: Exception | None = None

    def guarded(self, step, *args):
        """``step(*args)``; None (run the model's own code) once it or an earlier step raised."""
        if self.failure is not None:
            return None
        try:
            return step(*args)
        except Exception as exc:  # noqa: BLE001 - any failure of SeaCache's code falls back to the whole computation
            self.failure = exc
            return None


class StackCall(Guarded):
    """A :class:`GatedCall` applied where a seam enters and leaves the skippable stack (the seam contract,
    :class:`.seams.base.SeamCall`).

    ``enter(rows)`` returns the stack output to use instead of running the stack (a reused call), or None when
    the stack must run; ``leave(rows_out)`` records the computed output. Rows arrive in batch order, all at once
    (block stacks, diffusion-model calls) or item by item (models that loop over the batch).

    Whatever SeaCache runs inside the model goes through :meth:`guarded` (``enter`` and ``leave`` do)."""

    def __init__(self, call: GatedCall, batch: int, latent_channels: int):
        self.call, self.batch = call, batch
        self.latent_channels = latent_channels  # channels of the sampler's latent (concat conditioning excluded)
        self.reusing: bool | None = None
        self.predicted: torch.Tensor | None = None
        self.row = 0
        self.inputs: list[torch.Tensor] = []
        self.outputs: list[torch.Tensor] = []

    @torch.compiler.disable
    def enter(self, stack_in: torch.Tensor) -> torch.Tensor | None:
        """Stack output for these rows on a reused call (input plus the extrapolated residual), else None (also
        after a failure: the stack then runs)."""
        return self.guarded(self._enter, stack_in)

    def _enter(self, stack_in: torch.Tensor) -> torch.Tensor | None:
        if self.reusing is None:
            like = stack_in if stack_in.shape[0] == self.batch else stack_in[:1].expand(self.batch, *stack_in.shape[1:])
            self.predicted = self.call.predict(like)
            self.reusing = self.predicted is not None
        rows = stack_in.shape[0]
        if self.reusing:
            out = stack_in + self.predicted[self.row : self.row + rows]
            self.row += rows
            return out
        self.inputs.append(stack_in)
        return None

    @torch.compiler.disable
    def leave(self, stack_out: torch.Tensor) -> None:
        """Record the computed output of the rows entered last; commit the residual after the last row."""
        self.guarded(self._leave, stack_out)

    def _leave(self, stack_out: torch.Tensor) -> None:
        self.outputs.append(stack_out)
        if sum(o.shape[0] for o in self.outputs) < self.batch:
            return
        if len(self.outputs) == 1:
            residual = self.outputs[0] - self.inputs[0]
        else:
            residual = torch.cat([o - i for o, i in zip(self.outputs, self.inputs)])
        self.inputs.clear()
        self.outputs.clear()
        self.call.commit(residual)
