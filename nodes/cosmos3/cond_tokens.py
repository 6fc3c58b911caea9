"""The prompt's token ids as a ComfyUI conditioning value, batched the way ComfyUI batches conds."""

from __future__ import annotations

import torch

import comfy.conds


class CONDTokens(comfy.conds.CONDRegular):
    """Prompt token ids ``[1, L]``. Prompts of different lengths still batch: shorter ones are padded with -1,
    which the model drops (each item attends only to its own prompt), so cond and uncond share one call whenever
    ComfyUI's memory plan allows it."""

    def can_concat(self, other):
        return self.cond.ndim == other.cond.ndim == 2 and self.cond.device == other.cond.device

    def concat(self, others):
        rows = [self.cond] + [o.cond for o in others]
        width = max(r.shape[1] for r in rows)
        return torch.cat([torch.nn.functional.pad(r, (0, width - r.shape[1]), value=-1) for r in rows])
