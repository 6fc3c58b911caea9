"""Reuse decisions agreed across the ranks of a sequence-parallel run (seacache_core.run.agreed_reuse): two CPU processes on
gloo gate latents that differ by float noise, with a threshold between the two ranks' distances. Alone, the ranks
decide differently (in Raylight or xDiT one would skip a collective the other enters: a hang); joined, every call
takes the same decision on both, and it is "compute if any rank must"."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_core.run import agreed_reuse

STEPS = 10
SHAPE = (1, 4, 3, 16, 16)


def rank_latents(rank: int) -> list[torch.Tensor]:
    """The flow-form latents (1 - s) x0 + s eps of one run, plus this rank's float noise (relative 1e-5)."""
    generator = torch.Generator().manual_seed(0)
    x0, eps = torch.randn(SHAPE, generator=generator), torch.randn(SHAPE, generator=generator)
    noise = torch.randn(SHAPE, generator=torch.Generator().manual_seed(100 + rank)) * 1e-5
    return [(1 - s) * x0 + s * eps + noise for s in sigmas()[:STEPS]]


def sigmas() -> list[float]:
    return torch.linspace(1.0, 0.0, STEPS + 1).tolist()


def gate_run(latents: list[torch.Tensor], threshold: float) -> tuple[list[tuple[bool, str | None]], int, list]:
    """Decide, predict or compute, commit over one run, as a host does: (reuse, reason) per call, the reused count and
    the accumulated value of each call."""
    gate = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=threshold, order=1, max_consecutive=-1, warmup_steps=1,
                                      end_steps=1), sigmas())
    decisions, accumulated = [], []
    for latent, sigma in zip(latents, sigmas()):
        decision = gate.decide(latent, sigma, ["cond0/0"])
        if decision.reuse:
            assert gate.predict(decision, latent) is not None
        else:
            gate.commit(decision, torch.tanh(latent))  # the stack's residual
        decisions.append((decision.reuse, decision.reason))
        accumulated.append(decision.accumulated)
    return decisions, gate.stats.reused, accumulated


def rank_worker(rank: int, world: int, init_file: str, threshold: float, out_dir: str) -> None:
    """One rank: join the gloo group, run the gate on this rank's latents, save what it decided."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        decisions, reused, _ = gate_run(rank_latents(rank), threshold)
        torch.save({"decisions": decisions, "reused": reused}, f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_alone_a_process_keeps_its_own_decision():
    assert not dist.is_initialized()
    assert agreed_reuse(True, torch.device("cpu")) and not agreed_reuse(False, torch.device("cpu"))


def test_two_gloo_ranks_agree_on_every_decision_computing_if_any_must(tmp_path):
    # The threshold between the two ranks' first accumulated distance: alone, one rank reuses there, the other not.
    first = [gate_run(rank_latents(rank), threshold=10.0)[2][1] for rank in (0, 1)]
    assert first[0] != first[1] and abs(first[0] - first[1]) < 1e-4 * first[0]  # float noise, near the threshold
    threshold = (first[0] + first[1]) / 2
    alone = [gate_run(rank_latents(rank), threshold) for rank in (0, 1)]
    wanted_alone = [[reuse for reuse, _ in decisions] for decisions, _, _ in alone]
    assert wanted_alone[0][1] != wanted_alone[1][1]  # without agreement the ranks would part ways at call 1

    mp.spawn(rank_worker, args=(2, str(tmp_path / "init"), threshold, str(tmp_path)), nprocs=2, join=True)
    joined = [torch.load(tmp_path / f"rank{rank}.pt") for rank in (0, 1)]
    agreed = [[reuse for reuse, _ in result["decisions"]] for result in joined]
    assert agreed[0] == agreed[1] and len(agreed[0]) == STEPS
    # Each rank records the calls it would have reused but computed for the other as "other_rank"; what each rank
    # wanted is then known, and the agreed decision is "reuse only if every rank wanted to".
    wanted = [[reuse or reason == "other_rank" for reuse, reason in result["decisions"]] for result in joined]
    assert agreed[0] == [a and b for a, b in zip(*wanted)]
    assert wanted[0][1] != wanted[1][1] and not agreed[0][1]
    overridden = [sum(reason == "other_rank" for _, reason in result["decisions"]) for result in joined]
    assert sum(overridden) >= 1
    assert joined[0]["reused"] == joined[1]["reused"] == sum(agreed[0]) > 0
    assert joined[0]["reused"] <= min(reused for _, reused, _ in alone)
    timeline = lambda flags: "".join("R" if f else "C" for f in flags)  # noqa: E731
    print(f"alone: rank 0 {timeline(wanted_alone[0])}, rank 1 {timeline(wanted_alone[1])}; joined: {timeline(agreed[0])}")


def failing_rank_worker(rank: int, world: int, init_file: str, out_dir: str) -> None:
    """One rank of a run in which rank 1's gate raises at call 3 before agreeing, and from then on (as SeaCache's
    runtime does after stopping) only takes its part in each call's agreement; rank 0 gates every call."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        gate = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=10.0, order=1, max_consecutive=-1), sigmas())
        stopped, reuses = False, []
        for step, (latent, sigma) in enumerate(zip(rank_latents(rank), sigmas())):
            if stopped:
                reuses.append(agreed_reuse(False, latent.device))
                continue
            if rank == 1 and step == 3:
                gate.indicator = None  # SeaCache's own code fails inside decide, before the agreement
            try:
                decision = gate.decide(latent, sigma, ["cond0/0"])
            except AttributeError:
                stopped = True
                reuses.append(False)
                continue
            if gate.predict(decision, latent) is None:
                gate.commit(decision, torch.tanh(latent))
            reuses.append(decision.reuse)
        torch.save(reuses, f"{out_dir}/failing{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_a_rank_whose_gate_fails_keeps_the_agreement_matched(tmp_path):
    """Rank 1's gate raises mid-run: the run does not hang (each rank's collectives stay matched) and from that call
    on both ranks compute, rank 0 because rank 1 must."""
    mp.spawn(failing_rank_worker, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    reuses = [torch.load(tmp_path / f"failing{rank}.pt") for rank in (0, 1)]
    assert len(reuses[0]) == len(reuses[1]) == STEPS
    assert any(reuses[0][:3]) and not any(reuses[0][3:]) and not any(reuses[1][3:])
