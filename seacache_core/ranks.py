"""One reuse decision for all ranks of a sequence-parallel run (Raylight, xDiT: every rank samples the full latent
and the attention is split across ranks). A rank that skips the stack also skips the collectives inside it, so two
ranks that decide differently (float noise near the threshold) hang the run. When ``torch.distributed`` is
initialised with more than one rank, each gated call agrees across the default process group: it computes if any
rank must (one all-reduce of a one-element flag per gated call, as vLLM-Omni does)."""

from __future__ import annotations

import torch
import torch.distributed as dist


def ranks_share_the_run() -> bool:
    """Whether this process is one of several ranks of an initialised ``torch.distributed`` world."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def agreed_reuse(reuse: bool, device: torch.device) -> bool:
    """``reuse`` when this process runs alone; across ranks, True only if every rank's ``reuse`` is True (an all-reduce
    MAX of "must compute", on ``device`` for NCCL and on the CPU for gloo). Every rank must call it once per gated
    call, which it does when all ranks sample the same run."""
    if not ranks_share_the_run():
        return reuse
    where = torch.device("cpu") if dist.get_backend() == "gloo" else device
    must_compute = torch.tensor([0 if reuse else 1], dtype=torch.int32, device=where)
    dist.all_reduce(must_compute, op=dist.ReduceOp.MAX)
    return not bool(must_compute.item())
