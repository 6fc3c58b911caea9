"""One gated model call seen from the seam: the stack is entered (maybe in row groups) and left, and the
residual ``stack_out - stack_in`` is committed once every row of the call's batch has passed."""

from __future__ import annotations

import threading

import torch

from ...seacache_core import Decision, SeaCacheGate

CALL_OPTION = "seacache_call"
"""transformer_options key under which the SeaCache runtime hands the current call to the seam."""
RUN_OPTION = "seacache_run"
"""transformer_options key holding the SeaCache run (``nodes.seacache.runtime.SeaCacheRun``) during sampling."""


class StackCall:
    """The gate's decision for one model call, applied where a seam enters and leaves the skippable stack.

    ``enter(rows)`` returns the stack output to use instead of running the stack (a reused call), or None when
    the stack must run; ``leave(rows_out)`` records the computed output. Rows arrive in batch order, all at once
    (block stacks, diffusion-model calls) or item by item (models that loop over the batch). ``lock`` serialises
    the gate between concurrent calls of one run."""

    def __init__(self, gate: SeaCacheGate, lock: threading.Lock, decision: Decision, batch: int, latent_channels: int):
        self.gate, self.lock, self.decision, self.batch = gate, lock, decision, batch
        self.latent_channels = latent_channels  # channels of the sampler's latent (concat conditioning excluded)
        self.image_slice: slice | None = None  # block seams: the image tokens in a joint text+image stream
        self.double_out: torch.Tensor | None = None  # block seams: image stream leaving the double-stream blocks
        self.image_lost = False  # block seams: the image tokens were not found in the joint stream
        self.reusing: bool | None = None
        self.predicted: torch.Tensor | None = None
        self.row = 0
        self.inputs: list[torch.Tensor] = []
        self.outputs: list[torch.Tensor] = []
        self.done = False

    def predict_and_commit(self, like: torch.Tensor) -> torch.Tensor | None:
        """The extrapolated stack residual shaped like ``like``, with the reuse committed; None when the history does
        not fit (the call then computes). One place for both, under the run's lock."""
        with self.lock:
            predicted = self.gate.predict(self.decision, like)
            if predicted is not None:
                self.gate.commit(self.decision)
        return predicted

    @torch.compiler.disable
    def enter(self, stack_in: torch.Tensor) -> torch.Tensor | None:
        """Stack output for these rows on a reused call (input plus the extrapolated residual), else None."""
        if self.reusing is None:
            self.reusing = False
            if self.decision.reuse:
                like = stack_in if stack_in.shape[0] == self.batch else stack_in[:1].expand(self.batch, *stack_in.shape[1:])
                predicted = self.predict_and_commit(like)
                if predicted is not None:
                    self.reusing, self.predicted, self.done = True, predicted, True
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
        self.outputs.append(stack_out)
        if sum(o.shape[0] for o in self.outputs) < self.batch:
            return
        if len(self.outputs) == 1:
            residual = self.outputs[0] - self.inputs[0]
        else:
            residual = torch.cat([o - i for o, i in zip(self.outputs, self.inputs)])
        self.inputs.clear()
        self.outputs.clear()
        with self.lock:
            self.gate.commit(self.decision, residual)
        self.done = True

    def finish(self) -> bool:
        """After the model call: True when the call passed the seam and was committed; otherwise the decision is
        dropped from the gate (the model ran whole, its output is exact) and False is returned."""
        if not self.done:
            with self.lock:
                self.gate.discard(self.decision)
        return self.done
