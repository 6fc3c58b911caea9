"""Cost of the SeaCache gate on Cosmos3 latent shapes, and gain rebuilds over a run.

Run as `python -m benchmarks.bench_gate` (``--smoke``: tiny latents, one repeat, seconds on the CPU). Prints
numbers; asserts nothing about time.

(a) Gate cost per step: one `SeaCacheRun.decide` on the adjacent step of a branch with history, i.e. the
    SEA filter (rfftn, gain multiply, irfftn in float32) plus the relative L1 distance and its one host sync;
    the gain is cached as in a run (its build, once per step, is timed separately). Median of a few repeats.
(b) Gain builds over a 35-step run with cond and uncond: once per step, none per batch item.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from seacache_core import GainCache, SeaCacheConfig, SeaCacheRun
from seacache_testing.allocation_counters import CountingGainCache

SHAPES = {
    "1280x720x189f [1,48,48,45,80]": ((1, 48, 48, 45, 80), 3),
    "832x480x93f   [1,48,24,30,52]": ((1, 48, 24, 30, 52), 5),
}
SMOKE_SHAPES = {"tiny [1,48,5,6,8]": ((1, 48, 5, 6, 8), 1)}
STEPS = 35
SIGMAS = [0.9, 0.85, 0.8] + torch.linspace(0.75, 0.0, STEPS - 2).tolist()  # steps + 1 values


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_ms(fn, repeats: int, device: torch.device) -> float:
    """Median wall time of ``fn()`` after one warm-up call (allocator, FFT plans, cached gain), the device synced."""
    fn()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def gate_cost(shape, dtype, device, repeats) -> tuple[float, float]:
    """Median ms of one decide() in steady state, and of building one step's gain."""
    gen = torch.Generator().manual_seed(0)
    base = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    drift = torch.randn(shape, generator=gen).to(device=device, dtype=dtype)
    run = SeaCacheRun(SeaCacheConfig(threshold=0.25, gate="sea"), SIGMAS)
    residual = torch.zeros(1, 1, device=device)
    for step in range(2):
        run.commit(run.decide(base + step * 0.01 * drift, SIGMAS[step], ["cond"]), residual)
    latent = base + 0.02 * drift
    decide_ms = median_ms(lambda: run.decide(latent, SIGMAS[2], ["cond"]), repeats, device)
    gain_ms = median_ms(lambda: GainCache().rfft_gain(shape[-3:], 0.8, 3.0, device), repeats, device)
    return decide_ms, gain_ms


def flow_sigmas(steps: int, shift: float) -> list[float]:
    """The shifted flow-matching schedule (without the final 0)."""
    t = torch.linspace(1.0, 0.0, steps + 1, dtype=torch.float64)[:steps]
    return (shift * t / (1 + (shift - 1) * t)).tolist()


def gain_builds(shape, batched: bool) -> tuple[int, SeaCacheRun]:
    """Run STEPS steps with cond and uncond (one batched call, or two calls per step) and count gain builds."""
    gen = torch.Generator().manual_seed(1)
    base, drift = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    sigmas = flow_sigmas(STEPS, 5.0)
    run = SeaCacheRun(SeaCacheConfig(threshold=0.25, gate="sea"), sigmas + [0.0])
    run.gains = CountingGainCache()
    calls = [(["cond", "uncond"], 2)] if batched else [(["cond"], 1), (["uncond"], 1)]
    for sigma in sigmas:
        latent = base * (1 - sigma) + drift * sigma
        for keys, batch in calls:
            call = run.decide(latent.expand(batch, *shape[1:]), sigma, keys)
            if run.predict(call, torch.zeros(batch, 1)) is None:
                run.commit(call, torch.zeros(batch, 1))
    return run.gains.builds, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny latents and one repeat (seconds on the CPU)")
    smoke = parser.parse_args().smoke
    shapes = SMOKE_SHAPES if smoke else SHAPES
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print("(a) gate cost per step: decide() = SEA filter + distance (gain cached); gain build once per step")
    for device in devices:
        for name, (shape, repeats) in shapes.items():
            repeats = repeats if device.type == "cpu" or smoke else 20
            for dtype in (torch.float32, torch.bfloat16):
                decide_ms, gain_ms = gate_cost(shape, dtype, device, repeats)
                print(
                    f"  {device.type:4s} {name} {str(dtype).removeprefix('torch.'):8s} "
                    f"decide {decide_ms:8.2f} ms   gain build {gain_ms:6.2f} ms   (median of {repeats})"
                )
    shape = next(iter(shapes.values()))[0] if smoke else (1, 48, 24, 30, 52)
    print(f"(b) gain builds over a {STEPS}-step run, cond + uncond, latent {list(shape)}, CPU")
    builds, gate = gain_builds(shape, batched=True)
    print(f"  one batched call per step (batch 2): {builds} builds")
    builds, _ = gain_builds(shape, batched=False)
    print(f"  two calls per step (batch 1 each):   {builds} builds")
    print("  " + gate.stats.summary().replace("\n", "\n  "))


if __name__ == "__main__":
    main()
