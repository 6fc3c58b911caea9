"""Per-call cost of the first-block indicator against the raw-latent gates on Cosmos3, and what each keeps per branch.

    python -m benchmarks.bench_first_block [--quick] [--device cpu|cuda] [--nano] [--dtype [--pairs N]]

(a) On the tiny and medium Cosmos3 (random weights, seacache_testing/make_tiny_checkpoint.py sizes), the median ms
    of one gated call's gate work in steady state (a branch with history, on the adjacent step; the decision's host
    read included):
      raw latent `sea`, `sea same-sigma`: ``SeaCacheRun.decide`` on the sampler latent ``[1, 48, T, H, W]``;
      first block, first block same-sigma: the first layer's input norm applied to the stack input (the work the
      seam adds: the layer does it again when it runs), then ``decide`` on ``first_block_view`` (what a pending
      call does when it enters the stack) at the published settings;
    and one uncached model call of the same latent for scale.
(b) Bytes one branch keeps between steps at Cosmos3-Nano 1280x720x189 (text-to-video, and image-to-video with
    frame 0 given), from the config arithmetic alone (the first-block gates keep the view in the model dtype), and
    the complex spectrum one filter call holds meanwhile.
(c) With ``--nano``: (a)'s gate work on random tensors of the Nano 720p sizes (no model; several GB of memory).
(d) With ``--dtype``: what keeping the view in the model dtype changes. The trained natural Cosmos3 proxy is run in
    bf16 (uncached, cond and uncond batched, T2V and I2V, shifts 3, 5, 10); on its first-block views the run's
    distances and its decisions at the published settings, the view kept in bf16 (as shipped, and as diffusers
    keeps it) against the same view kept in float32.

Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics

import torch

from benchmarks.bench_gate import median_ms
from cosmos3 import Cosmos3Config
from cosmos3.config import LATENT_CHANNELS, VAE_SPATIAL, VAE_TEMPORAL
from cosmos3.ops import TorchOps, norm_class
from seacache_core import SeaCacheConfig, SeaCacheRun
from cosmos3 import reference_sigmas
from seacache_core.vision_tokens import VisionTokens, first_block_view, noisy_frames_view
from seacache_testing.first_block_recipe import indicator_bytes, published_config
from seacache_testing.cosmos3_random_weights import random_model
from seacache_testing.make_tiny_checkpoint import MEDIUM_SIZES, TINY_SIZES

SIGMAS = (0.9, 0.85, 0.8)  # steps 0, 1 committed, step 2 timed
SCHEDULE = (*SIGMAS, 0.75, 0.0)  # step 2 is neither the first nor the last
MODELS = {"tiny": TINY_SIZES, "medium": MEDIUM_SIZES}
LATENTS = {"quick": (3, 16, 16), "full": (8, 30, 52)}  # latent (T, H, W): 832x480x29 for the full run
NANO_VIDEO = (1280, 720, 189)


def steady_gate_ms(config: SeaCacheConfig, gate_input, repeats: int, device: torch.device) -> float:
    """Median ms of producing the gate's input for step 2 (``gate_input(step)``) and deciding on it, for a branch
    whose steps 0 and 1 were computed; each timed verdict is dropped uncommitted, so every repeat sees the same
    state."""
    run = SeaCacheRun(config, SCHEDULE)
    residual = torch.zeros(1, 1, device=device)
    for step in (0, 1):
        run.commit(run.decide(gate_input(step), SIGMAS[step], ["cond"]), residual)
    return median_ms(lambda: run.decide(gate_input(2), SIGMAS[2], ["cond"]), repeats, device)


def gate_costs(config: Cosmos3Config, latent_thw, norm, dtype, device, repeats) -> dict[str, float]:
    """Gate work per call (ms) of the raw-latent gates and the first-block indicator, on random inputs that drift
    from step to step; ``norm`` is the first generator layer's input norm."""
    g = torch.Generator().manual_seed(0)
    latent_shape = (1, LATENT_CHANNELS, *latent_thw)
    grid = (latent_thw[0], -(-latent_thw[1] // config.latent_patch_size), -(-latent_thw[2] // config.latent_patch_size))
    tokens = VisionTokens(grid)
    base, drift = (torch.randn(latent_shape, generator=g).to(device, dtype) for _ in range(2))
    hidden = torch.randn(1, tokens.count, config.hidden_size, generator=g).to(device, dtype)
    hidden_drift = torch.randn(hidden.shape, generator=g).to(device, dtype)

    def latent(step):
        return base + 0.02 * step * drift

    def first_block(step):
        with torch.no_grad():
            return first_block_view(norm(hidden + 0.02 * step * hidden_drift), tokens)

    raw = dict(threshold=0.25, power=3.0)
    return {
        "raw sea": steady_gate_ms(SeaCacheConfig(gate="sea", **raw), latent, repeats, device),
        "raw same-sigma": steady_gate_ms(SeaCacheConfig(gate="sea_same_sigma", **raw), latent, repeats, device),
        "first block": steady_gate_ms(published_config(), first_block, repeats, device),
        "first block same-sigma": steady_gate_ms(published_config(gate="first_block_same_sigma"), first_block,
                                                 repeats, device),
    }


def model_call_ms(model, latent_thw, dtype, device, repeats) -> float:
    """Median ms of one uncached model call (batch 1, a 9-token prompt)."""
    latent = torch.randn(1, LATENT_CHANNELS, *latent_thw, generator=torch.Generator().manual_seed(1)).to(device, dtype)
    sigma = torch.tensor([0.8], device=device)
    ids = torch.arange(9, device=device)[None]

    def call():
        with torch.no_grad():
            model(latent, sigma, ids, fps=24.0)

    return median_ms(call, repeats, device)


def nano_tokens(width: int, height: int, frames: int, config: Cosmos3Config, i2v: bool) -> VisionTokens:
    """The vision tokens of a Cosmos3 latent of a ``width`` x ``height`` x ``frames`` video (frame 0 given for
    image-to-video)."""
    t = (frames - 1) // VAE_TEMPORAL + 1
    p = config.latent_patch_size
    grid = (t, -(-height // VAE_SPATIAL // p), -(-width // VAE_SPATIAL // p))
    return VisionTokens(grid, noisy_frames=tuple(range(1, t)) if i2v else None)


def mib(n: int) -> str:
    return f"{n:,} B ({n / 2**20:.1f} MiB)"


def print_bytes() -> None:
    """(b): bytes kept per branch at Nano 1280x720x189, from the config arithmetic."""
    nano = Cosmos3Config()
    width, height, frames = NANO_VIDEO
    t = (frames - 1) // VAE_TEMPORAL + 1
    latent = (LATENT_CHANNELS, t, height // VAE_SPATIAL, width // VAE_SPATIAL)
    raw = 4 * LATENT_CHANNELS * t * latent[2] * latent[3]
    print(f"(b) kept per branch between steps, Cosmos3-Nano {width}x{height}x{frames} "
          f"(latent {list(latent)}, hidden {nano.hidden_size}):")
    print(f"  raw latent (sea, sea same-sigma), float32: {mib(raw)}")
    for task, i2v in (("t2v", False), ("i2v", True)):
        tokens = nano_tokens(width, height, frames, nano, i2v)
        kept = indicator_bytes(tokens, nano.hidden_size, element_size=2)
        print(f"  first block {task} ({tokens.frames_read} x {tokens.grid[1]} x {tokens.grid[2]} tokens x "
              f"{nano.hidden_size}): bf16, the model dtype, as the pack's gate and diffusers keep it {mib(kept)} = "
              f"{kept / raw:.1f}x the raw latent; float32 {mib(2 * kept)}")
    tokens = nano_tokens(width, height, frames, nano, False)
    spectrum = 8 * nano.hidden_size * tokens.grid[0] * tokens.grid[1] * (tokens.grid[2] // 2 + 1)
    print(f"  held during one filter call (the rfft spectrum, complex64): first block {mib(spectrum)}, "
          f"raw latent {mib(8 * LATENT_CHANNELS * t * latent[2] * (latent[3] // 2 + 1))}")

def kept_in(dtype, views: list[torch.Tensor], sigmas) -> tuple[list[dict], list[bool]]:
    """Per call of a run over ``views`` (one per step, cond and uncond) at the published settings, the view kept
    in ``dtype``: each branch's distance, and whether the call computed."""
    run = SeaCacheRun(published_config(), sigmas)
    residual = torch.zeros(2, 1)
    for view, sigma in zip(views, sigmas):
        call = run.pending(float(sigma), ["cond", "uncond"])
        if call.enter(residual, lambda: view.to(dtype)) is None:
            call.leave(residual)
    records = run.stats.records
    distances = [{key: branch["distance"] for key, branch in r.branches.items()} for r in records]
    return distances, [r.decision != "reused" for r in records]


def storage_dtype(pairs: int, steps: int = 35) -> None:
    """(d): the first-block gate's distances and decisions with the view kept in bf16 against float32, on the
    natural Cosmos3 proxy run in bf16."""
    from seacache_testing import quality_proxy as proxy

    data = proxy.NATURAL
    model = proxy.load_proxy(data.folder, dtype=torch.bfloat16, data=data)
    model.time_embedder.float()  # kept in float32 by the model, as a bf16 checkpoint loads it
    differences, flips, decisions, calls = [], 0, 0, 0
    for shift in (3.0, 5.0, 10.0):
        for i2v in (False, True):
            for p in range(pairs):
                views = []

                def capture(hidden, inputs):
                    with torch.no_grad():
                        views.append(noisy_frames_view(model.layers[0].input_layernorm_moe_gen(hidden), inputs.grid,
                                                       inputs.frame_is_clean))
                    return model.run_gen_stack(hidden, inputs)

                label, seed = p % data.classes, 70_000 + p
                first = None
                if i2v:  # frame 0 of a real clip of the class, as bench_peers conditions image-to-video
                    first = data.clips(torch.tensor([label]), torch.Generator().manual_seed(seed))[0][:, :, :1]
                model.call_gen_stack = capture
                try:  # the sampler's float32 latent in the model's bf16, its velocity back in float32
                    proxy.sample(lambda x, *args, **kwargs: model(x.to(torch.bfloat16), *args, **kwargs).float(),
                                 label, seed, steps=steps, shift=shift, data=data, first_frame=first)
                finally:
                    del model.call_gen_stack
                sigmas = reference_sigmas(steps, shift).tolist()
                (d16, c16), (d32, c32) = kept_in(torch.bfloat16, views, sigmas), kept_in(torch.float32, views, sigmas)
                for a, b in zip(d16, d32):
                    for key in b:
                        if b[key] is not None:
                            differences.append(abs(a[key] - b[key]) / b[key])
                flips += sum(x != y for x, y in zip(c16, c32))
                decisions += sum(c16)
                calls += len(c16)
    print(f"(d) first-block view kept in bf16 against float32, natural Cosmos3 proxy in bf16, {pairs} pairs x "
          f"shifts 3, 5, 10 x T2V and I2V, {steps} steps, published settings: relative distance difference median "
          f"{statistics.median(differences):.1e}, largest {max(differences):.1e}; {flips} of {calls} decisions differ "
          f"({decisions} calls computed with bf16)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small latents, 3 repeats (seconds on the CPU)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (default 3 quick, 5 full)")
    parser.add_argument("--nano", action="store_true", help="also time the gate work at Nano 720p sizes (GBs)")
    parser.add_argument("--dtype", action="store_true", help="only (d): the view kept in bf16 against float32")
    parser.add_argument("--pairs", type=int, default=4, help="prompt/seed pairs of --dtype")
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    if args.dtype:
        storage_dtype(args.pairs)
        return
    repeats = args.repeats or (3 if args.quick else 5)
    latent_thw = LATENTS["quick" if args.quick else "full"]
    print(f"torch {torch.__version__}, {device.type}, {str(dtype).removeprefix('torch.')}, "
          f"{torch.get_num_threads()} CPU threads, median of {repeats}")
    print(f"(a) gate work per call, latent [1, {LATENT_CHANNELS}, {', '.join(map(str, latent_thw))}] (ms):")
    print("  | model | tokens x width | raw sea | raw same-sigma | first block | first block same-sigma | "
          "first block / raw sea | model call |")
    print("  | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, sizes in MODELS.items():
        config = Cosmos3Config(**sizes)
        model = random_model(config, dtype, device, seed=0)
        costs = gate_costs(config, latent_thw, model.layers[0].input_layernorm_moe_gen, dtype, device, repeats)
        call = model_call_ms(model, latent_thw, dtype, device, repeats)
        print(f"  | {name} | {config.token_count(*latent_thw)} x {config.hidden_size} | {costs['raw sea']:.2f} | "
              f"{costs['raw same-sigma']:.2f} | {costs['first block']:.2f} | {costs['first block same-sigma']:.2f} | "
              f"{costs['first block'] / costs['raw sea']:.1f}x | {call:.1f} |")
        del model
    print_bytes()
    if args.nano:
        nano = Cosmos3Config()
        width, height, frames = NANO_VIDEO
        thw = ((frames - 1) // VAE_TEMPORAL + 1, height // VAE_SPATIAL, width // VAE_SPATIAL)
        norm = norm_class(TorchOps, nano.hidden_act)(nano.hidden_size, eps=nano.rms_norm_eps).to(device, dtype)
        costs = gate_costs(nano, thw, norm, dtype, device, repeats)
        print(f"(c) gate work per call at Nano {width}x{height}x{frames} (ms): "
              + ", ".join(f"{k} {v:.1f}" for k, v in costs.items()))


if __name__ == "__main__":
    main()
