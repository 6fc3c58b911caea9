"""One gated call through the per-call protocol: decide, then predict or compute, then commit or discard."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch

from .gate import Decision, SeaCacheGate


class GatedCall:
    """The one place where a call's decision is carried out. The call starts decided (:meth:`SeaCacheGate.decide`);
    then either :meth:`predict` gives the extrapolated residual and commits the reuse, or the caller computes the
    stack and :meth:`commit` records its residual; :meth:`finish` drops a decision neither happened to (the model
    ran whole without passing the stack: its output is exact, the gate forgets the call). ``lock`` serialises the
    gate between concurrent calls of one run."""

    def __init__(self, gate: SeaCacheGate, decision: Decision, lock: AbstractContextManager | None = None):
        self.gate, self.decision = gate, decision
        self.lock = lock if lock is not None else nullcontext()
        self.done = False

    @torch.compiler.disable
    def predict(self, like: torch.Tensor) -> torch.Tensor | None:
        """On a reuse decision, the extrapolated residual shaped like ``like`` with the reuse committed; None when
        the call must compute (no reuse, or the history does not fit ``like``)."""
        if not self.decision.reuse:
            return None
        with self.lock:
            predicted = self.gate.predict(self.decision, like)
            if predicted is not None:
                self.gate.commit(self.decision)
                self.done = True
        return predicted

    @torch.compiler.disable
    def commit(self, residual: torch.Tensor) -> None:
        """Record the residual (stack output minus input) of a computed call."""
        with self.lock:
            self.gate.commit(self.decision, residual)
        self.done = True

    @torch.compiler.disable
    def finish(self) -> bool:
        """After the model call: True when it was committed; otherwise the decision is discarded and False returned."""
        if not self.done:
            with self.lock:
                self.gate.discard(self.decision)
        return self.done
