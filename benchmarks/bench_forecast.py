"""Cost and memory of Spectrum's Chebyshev forecast (`seacache_core.forecast.ChebyshevHistory`) against the Newton
extrapolation (`ResidualHistory`) it blends with.

Run as `python -m benchmarks.bench_forecast` (``--quick``: a tiny residual and few repeats, seconds on the CPU;
``--device cuda`` on a GPU). Prints numbers; asserts nothing about time.

(a) History bytes for a Cosmos3-Nano residual (generator tokens x hidden, bf16) at 832x480x93 and 1280x720x189:
    the formula, then per branch and per run with cond + uncond, for each history; with "cpu" storage these bytes
    live in host memory and each reused step moves them all to the device. Arithmetic only, nothing allocated.
(b) Per-call predict cost on a fake residual of a small size (the history filled at the steps Spectrum computes in a
    35-step run, predicting the next step), median of repeats, and the host solve of the weights alone.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from cosmos3 import Cosmos3Config
from seacache_core import ResidualHistory, SeaCacheConfig, SeaCacheRun
from seacache_core.forecast import chebyshev_weights, forecast_weights
from seacache_testing.memory_plan import generator_tokens
from seacache_testing.spectrum_forecast import (
    SPECTRUM_DEGREE, SPECTRUM_RIDGE_LAMBDA, SPECTRUM_STEP_SPAN, SpectrumHistory, spectrum_schedule,
)

SIZES = ((832, 480, 93), (1280, 720, 189))
STEPS = 35
MIB = 2 ** 20
SHAPE = (1, 4096, 256)  # fake residual: 1M elements
QUICK_SHAPE = (1, 256, 64)


def histories(storage: str) -> dict[str, ResidualHistory]:
    """The histories compared: Newton orders 1 and 2, the Chebyshev forecast at blends 1, 0.5 and 0, and the one
    SeaCache Apply's residual_order "chebyshev" runs on Cosmos3 (SeaCacheRun.new_history)."""
    run = SeaCacheRun(SeaCacheConfig(forecaster="chebyshev", order=2), [1.0 - i / STEPS for i in range(STEPS + 1)])
    run.config.residual_storage = storage
    return {
        "newton order 1": ResidualHistory(1, storage),
        "newton order 2": ResidualHistory(2, storage),
        "seacache chebyshev (order 2)": run.new_history(),
        "chebyshev blend 1": SpectrumHistory(1, storage, blend=1.0),
        "chebyshev blend 0.5 (order 1)": SpectrumHistory(1, storage, blend=0.5),
        "chebyshev blend 0 (order 1)": SpectrumHistory(1, storage, blend=0.0),
    }


def memory_table() -> None:
    config = Cosmos3Config()  # Cosmos3-Nano's dimensions
    print(f"(a) history bytes per branch = records kept x generator tokens x hidden ({config.hidden_size}) x 2 (bf16);"
          f" cond + uncond = 2 branches")
    print("| size | tokens | one residual MiB | history | records | per branch MiB | cond + uncond MiB |")
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for width, height, frames in SIZES:
        tokens = generator_tokens(config, width, height, frames)
        residual = tokens * config.hidden_size * 2
        for name, history in histories("compute").items():
            if name.startswith(("chebyshev blend 0", "seacache")):
                continue  # same records as blend 1
            kept = history.capacity
            print(f"| {width}x{height}x{frames} | {tokens:,} | {residual / MIB:,.1f} | "
                  f"{name.removesuffix(' blend 1')} | {kept} | {kept * residual / MIB:,.1f} | "
                  f"{2 * kept * residual / MIB:,.1f} |")
    print("  a Chebyshev prediction (blend > 0) adds one float32 output (2 x one residual) on the device; with cpu "
          "storage it moves every kept record there, one at a time (blend 0: the Newton records only)")


def _median_ms(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up: allocator, pinned buffers, linear-algebra kernels
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def predict_costs(shape, device: torch.device, repeats: int) -> None:
    computed = [i for i, c in enumerate(spectrum_schedule(STEPS)) if c]
    target = next(i for i in range(computed[-1], STEPS) if i not in computed)
    numel = torch.Size(shape).numel()
    print(f"(b) predict at step {target} after the {len(computed)} computed steps of Spectrum's {STEPS}-step schedule; "
          f"fake bf16 residual {list(shape)} ({numel:,} elements) on {device.type}; median of {repeats}")
    weights_ms = _median_ms(
        lambda: chebyshev_weights(computed, target, SPECTRUM_DEGREE, SPECTRUM_RIDGE_LAMBDA, SPECTRUM_STEP_SPAN),
        repeats, device)
    print(f"  host solve of the {len(computed)} weights alone: {weights_ms * 1e3:8.1f} us")
    centred_ms = _median_ms(lambda: forecast_weights(computed, target, 2, SPECTRUM_DEGREE, SPECTRUM_RIDGE_LAMBDA, 0.5,
                                                     STEPS), repeats, device)
    print(f"  host weights of the seacache chebyshev (Newton-centred, order 2): {centred_ms * 1e3:8.1f} us")
    gen = torch.Generator().manual_seed(0)
    residuals = [torch.randn(shape, generator=gen).to(device=device, dtype=torch.bfloat16) for _ in computed]
    for storage in ("compute", "cpu"):
        for name, history in histories(storage).items():
            for step, residual in zip(computed, residuals):
                history.append(step, residual)
            ms = _median_ms(lambda: history.predict(target, device, torch.bfloat16), repeats, device)
            print(f"  {storage:7s} {name:30s} {len(history):2d} records  {ms:8.3f} ms  "
                  f"{ms * 1e6 / numel:6.2f} ns/element")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny residual and few repeats (seconds on the CPU)")
    parser.add_argument("--device", default="cpu", help="where the residuals are produced (cpu, cuda)")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    memory_table()
    predict_costs(QUICK_SHAPE if args.quick else SHAPE, device, 3 if args.quick else 20)


if __name__ == "__main__":
    main()
