"""GPU benchmark of SeaCache on the native Cosmos3 at Cosmos3-Nano's real dimensions (torch + this pack only).

Builds ``cosmos3.Cosmos3Transformer`` with random weights directly on the device (hidden 4096, 36 layers, 32/8
heads x 128, MLP 12288, vocab 151936: the ``Cosmos3Config`` defaults), no file and no download, and runs the
reference sampler loop (flow-matching Euler over ``reference_sigmas``, CFG 6 with cond and uncond batched in one
call) uncached and with SeaCache at the paper's recipe (gate ``sea``, threshold 0.25), per size and weight storage
(bf16; fp8 e4m3fn storage with bf16 compute). Prints one table: per-step time of computed and reused steps, the
gate's cost (SEA filter + distance) as % of a computed step, wall time, measured speedup vs the ideal calls/full,
and the peak of ``torch.cuda.max_memory_allocated`` split into weights, activations, text K/V and SeaCache history
(measured; the activation estimate of ``cosmos3.model.activation_bytes`` beside it).

Timing: CUDA events around every step with a synchronisation per step, after a warm-up run of each path
(computed and reused steps). Random weights make the gate decide differently from trained ones, so
``--replay PATTERN`` (letters F/C/R as the demo's timeline prints them, spaces allowed, or a file holding such a
timeline) imposes exactly that pattern (the gate still runs each step, its verdict replaced) to time it.
``--checkpoint PATH`` loads real weights (a Cosmos3 folder or merged .safetensors) and adds PSNR/SSIM of the
SeaCache latent vs the uncached one (latent space: there is no VAE here).

Default run: 832x480x93 with 35 steps and 1280x720x189 with 10 steps, bf16 and fp8, sized by a FLOP estimate
to take 5-7 min on one H200 (not yet measured); a run whose estimate (from its warm-up) would end after
``--budget-s`` (default 420 s) is skipped and listed, so the command stays under 8 minutes. ``--smoke`` runs tiny dims on the CPU.

    python -m benchmarks.bench_gpu                       # the default GPU run
    python -m benchmarks.bench_gpu --sizes 832x480x93@35 --dtypes fp8 --replay "F R C C R R C ..."
    python -m benchmarks.bench_gpu --smoke               # CPU, tiny model, same table
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, Cosmos3Transformer, TextKVCache, reference_sigmas
from seacache_core import SeaCacheConfig, SeaCacheRun
from seacache_testing.cosmos3_random_weights import random_model
from seacache_testing.memory_plan import GIB, activation_bytes, latent_grid, nbytes
from seacache_testing.seacache_host import SeaCachedCosmos3

DTYPES = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn}
DEFAULT_SIZES = "832x480x93@35,1280x720x189@10"
SMOKE_SIZES = "128x64x9@12,128x128x17@12"
SMOKE_CONFIG = dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                    intermediate_size=384, vocab_size=1024, rope_axes_dim=(6, 5, 5))
CFG_SCALE = 6.0
PROMPT = "A red fox runs through deep fresh snow at dawn, cinematic, detailed fur."
FPS = 24.0


# ------------------------------------------------------------------------------------------- timing helpers
class Clock:
    """Marks on the device timeline: CUDA events on a GPU, perf_counter on the CPU."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self):
        """A point on the timeline (a recorded CUDA event, or the CPU clock)."""
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def ms(self, start, end) -> float:
        """Milliseconds between two marks (synchronises on ``end``)."""
        if self.cuda:
            end.synchronize()
            return start.elapsed_time(end)
        return (end - start) * 1e3

    def sync(self):
        """Wait for the device (no-op on the CPU)."""
        if self.cuda:
            torch.cuda.synchronize()


def parse_pattern(text: str) -> str:
    """F/C/R letters of a timeline given inline or as a file (the last line naming a timeline, else all of it)."""
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            lines = f.read().splitlines()
        marked = [line.split(":", 1)[-1] for line in lines if "timeline" in line.lower()]
        text = marked[-1] if marked else " ".join(lines)
    letters = "".join(ch for ch in text.upper() if not ch.isspace())
    bad = sorted(set(letters) - set("FCR"))
    if bad or not letters:
        raise SystemExit(f"--replay: expected letters F (forced), C (computed), R (reused), got {bad or 'nothing'}.")
    if letters[0] == "R":
        raise SystemExit("--replay: the first step cannot be reused (nothing to extrapolate from).")
    return letters


def impose(decision, letter: str, run) -> None:
    """Replace the run's verdict by the pattern's letter (R: reuse, F/C: compute) in place."""
    if letter == "R" and not decision.reuse:
        if any(run.states.get(p.key) is None or not len(run.states[p.key].history) for p in decision.branches):
            return  # nothing recorded yet for some branch: the step must compute
        decision.reuse, decision.reason = True, None
        for plan in decision.branches:
            plan.reason, plan.reset, plan.repeat = None, False, False
            plan.accumulated = plan.accumulated if plan.accumulated is not None else 0.0
    elif letter in "FC" and decision.reuse:
        decision.reuse, decision.reason = False, "threshold" if letter == "C" else "replay"


@dataclass
class GateProbe:
    """Wraps a run's ``decide``: times each (SEA filter + distance) and optionally imposes a pattern."""

    run: SeaCacheRun
    clock: Clock
    pattern: str | None = None
    marks: list = field(default_factory=list)

    def __post_init__(self):
        decide = self.run.decide

        def timed_decide(*args, **kwargs):
            start = self.clock.mark()
            decision = decide(*args, **kwargs)  # whatever the gate's signature: the probe only reads the verdict
            if self.pattern is not None and decision.step is not None:
                impose(decision, self.pattern[decision.step], self.run)
            self.marks.append((start, self.clock.mark()))
            return decision

        self.run.decide = timed_decide

    def gate_ms(self) -> list[float]:
        """Milliseconds of each timed ``decide``."""
        return [self.clock.ms(a, b) for a, b in self.marks]


# ------------------------------------------------------------------------------------------- model
def build_model(config: Cosmos3Config, weight_dtype: torch.dtype, device: torch.device, seed: int,
                checkpoint: str | None) -> Cosmos3Transformer:
    """The model with its parameters allocated directly on ``device``: random weights, or a checkpoint's."""
    model = random_model(config, weight_dtype, device, seed)
    if checkpoint:
        from cosmos3 import load_weights, shard_files

        load_weights(model, shard_files(checkpoint))
    return model


def prompt_tokens(config: Cosmos3Config, lengths: tuple[int, int], device, checkpoint: str | None, size) -> torch.Tensor:
    """[2, L_max] token ids (cond, uncond), -1 after each prompt: from the checkpoint's tokenizer with a fixed
    prompt and its negative prompt, else random ids of the given lengths."""
    tokenizer = None
    if checkpoint and os.path.isdir(checkpoint):
        try:
            from cosmos3.tokenizer import Cosmos3Tokenizer  # needs the tokenizers and jinja2 packages
        except ImportError as err:
            print(f"note: no prompt tokenizer ({err}); random prompt tokens are used with the checkpoint's weights")
        else:
            tokenizer = Cosmos3Tokenizer
    if tokenizer is not None:
        tok = tokenizer.from_folder(checkpoint)
        w, h, f = size
        common = dict(width=w, height=h, frames=f, fps=FPS)
        ids = [tok.encode(PROMPT, negative=False, **common), tok.encode(negative_prompt(checkpoint), negative=True, **common)]
    else:
        gen = torch.Generator().manual_seed(7)
        ids = [torch.randint(0, config.vocab_size, (n,), generator=gen).tolist() for n in lengths]
    tokens = torch.full((2, max(map(len, ids))), -1, dtype=torch.long)
    for row, seq in enumerate(ids):
        tokens[row, : len(seq)] = torch.tensor(seq)
    return tokens.to(device)


def negative_prompt(root: str) -> str:
    """The checkpoint's ``assets/negative_prompt.json`` as the reference passes it (a JSON document as its
    ``json.dumps`` string), "" when absent."""
    import json

    path = os.path.join(root, "assets", "negative_prompt.json")
    if not os.path.isfile(path):
        return ""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    return data if isinstance(data, str) else json.dumps(data)


# ------------------------------------------------------------------------------------------- one run
@dataclass
class RunResult:
    """Timings, memory and the final latent of one sampling run."""

    kind: str  # "uncached" or "seacache"
    steps: int
    step_ms: list[float]
    decisions: list[str]  # per step: "computed" / "reused"
    gate_ms: list[float]
    text_ms: float
    wall_s: float
    peak: int
    base: int
    history: int
    latent: torch.Tensor
    timeline: str = ""

    def median(self, decision: str) -> float:
        """Median step ms of the steps with this decision ("computed"/"reused"), NaN when there are none."""
        values = [t for t, d in zip(self.step_ms, self.decisions) if d == decision]
        return statistics.median(values) if values else float("nan")

    @property
    def full(self) -> int:
        """Steps that ran the generator stack."""
        return sum(d == "computed" for d in self.decisions)


def sample(model, tokens, noise, sigmas, dtype, clock, config=None, pattern=None) -> RunResult:
    """One sampling run (with SeaCache at ``config`` when given): the text pathway once (its K/V cached for the
    run), then the Euler/CFG loop."""
    device = noise.device
    steps = len(sigmas) - 1
    cuda = device.type == "cuda"
    run = SeaCacheRun(config, sigmas) if config is not None else None
    probe = GateProbe(run, clock, pattern) if run is not None else None
    model.call_gen_stack = SeaCachedCosmos3(model, run)
    cache = TextKVCache()
    options = {TEXT_KV_CACHE_KEY: cache}
    clock.sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() if cuda else 0
    wall_start = time.perf_counter()
    start = clock.mark()
    model.text_kv(tokens, dtype, options)
    text_ms = clock.ms(start, clock.mark())
    x = noise.clone()
    step_ms = []
    with torch.no_grad():
        for i in range(steps):
            start = clock.mark()
            sigma = sigmas[i].to(device).expand(2)
            v = model(x.to(dtype).expand(2, -1, -1, -1, -1), sigma, tokens, fps=FPS, transformer_options=options).float()
            x = x + (sigmas[i + 1] - sigmas[i]).item() * (v[1:] + CFG_SCALE * (v[:1] - v[1:]))
            step_ms.append(clock.ms(start, clock.mark()))
    wall_s = time.perf_counter() - wall_start
    peak = torch.cuda.max_memory_allocated() if cuda else 0
    if run is None:
        decisions, gate_ms, history, timeline = ["computed"] * steps, [], 0, ""
    else:
        records = run.stats.records
        decisions = ["reused" if r.decision == "reused" else "computed" for r in records]
        gate_ms = probe.gate_ms()
        history = sum(nbytes(r for _, r in run.states[k].history.records) for k in ("cond", "uncond"))
        timeline = " ".join({"forced": "F", "computed": "C", "reused": "R"}[r.decision] for r in records)
        run.release()
    del model.call_gen_stack  # back to the class method (the host referenced the model: no cycle left)
    cache.clear()
    return RunResult("seacache" if run is not None else "uncached", steps, step_ms, decisions, gate_ms, text_ms,
                     wall_s, peak, base, history, x, timeline)


# ------------------------------------------------------------------------------------------- quality
def psnr(a: torch.Tensor, ref: torch.Tensor) -> float:
    """PSNR in dB of ``a`` vs ``ref`` with the reference's value range as the peak."""
    mse = F.mse_loss(a.float(), ref.float()).item()
    peak = (ref.max() - ref.min()).item()
    return float("inf") if mse == 0 else 10 * math.log10(peak * peak / mse)


def ssim(a: torch.Tensor, ref: torch.Tensor) -> float:
    """Mean SSIM over every channel and frame of latents [1, C, T, H, W] (11x11 Gaussian window, sigma 1.5,
    constants for the reference's value range)."""
    a, ref = (t.float().flatten(0, 2).unsqueeze(1) for t in (a, ref))
    coords = torch.arange(11, dtype=torch.float32, device=a.device) - 5
    g = torch.exp(-coords**2 / (2 * 1.5**2))
    g = (g / g.sum())
    window = (g[:, None] * g[None, :])[None, None]
    blur = lambda t: F.conv2d(t, window, padding=5)  # noqa: E731
    rng = (ref.max() - ref.min()).item()
    c1, c2 = (0.01 * rng) ** 2, (0.03 * rng) ** 2
    mu_a, mu_r = blur(a), blur(ref)
    var_a, var_r = blur(a * a) - mu_a**2, blur(ref * ref) - mu_r**2
    cov = blur(a * ref) - mu_a * mu_r
    s = ((2 * mu_a * mu_r + c1) * (2 * cov + c2)) / ((mu_a**2 + mu_r**2 + c1) * (var_a + var_r + c2))
    return s.mean().item()


# ------------------------------------------------------------------------------------------- main
def parse_sizes(text: str, default_steps: int | None) -> list[tuple[int, int, int, int]]:
    """'WxHxF@STEPS,...' -> [(w, h, frames, steps)]; --steps overrides every size's step count."""
    out = []
    for item in text.split(","):
        dims, _, steps = item.strip().partition("@")
        try:
            w, h, f = (int(v) for v in dims.lower().split("x"))
            n = default_steps or int(steps or 35)
        except ValueError:
            raise SystemExit(f"--sizes: {item!r} is not WIDTHxHEIGHTxFRAMES[@STEPS], e.g. 832x480x93@35.") from None
        if w % 16 or h % 16 or (f - 1) % 4:
            raise SystemExit(f"--sizes: {item!r}: width/height must be multiples of 16 and frames 4k+1.")
        out.append((w, h, f, n))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", help=f"WxHxF@STEPS list (default {DEFAULT_SIZES}; smoke {SMOKE_SIZES})")
    parser.add_argument("--steps", type=int, help="steps for every size (overrides @STEPS)")
    parser.add_argument("--dtypes", default="bf16,fp8", help="weight storage: bf16, fp8 (fp8 e4m3fn, bf16 compute)")
    parser.add_argument("--shift", type=float, default=5.0, help="sigma shift (reference: 5 at 480p, 10 at 720p)")
    parser.add_argument("--replay", help="impose this F/C/R pattern (inline or a file with a timeline); sets steps")
    parser.add_argument("--checkpoint", help="real weights (Cosmos3 folder or merged .safetensors); adds PSNR/SSIM")
    parser.add_argument("--prompt-tokens", type=int, nargs=2, default=[256, 512], help="cond/uncond prompt lengths (random weights)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="skip runs that would end later than this")
    parser.add_argument("--residual-storage", default="compute", choices=["compute", "cpu"],
                        help="where SeaCache keeps its residual history (cpu: pinned host buffers, async copies)")
    parser.add_argument("--smoke", action="store_true", help="tiny model on the CPU, few steps (no GPU needed)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    t0 = time.perf_counter()
    if args.smoke:
        device, config = torch.device("cpu"), Cosmos3Config(**SMOKE_CONFIG)
        torch.set_num_threads(1)  # tiny ops: extra threads only contend on a shared CPU
    elif not torch.cuda.is_available():
        raise SystemExit("No CUDA device: run on a GPU machine, or use --smoke for the CPU version.")
    else:
        device = torch.device("cuda")
        config = Cosmos3Config()
        if args.checkpoint:
            from cosmos3 import read_config, shard_files, tensor_shapes

            config = read_config(args.checkpoint, tensor_shapes(shard_files(args.checkpoint)))
    pattern = parse_pattern(args.replay) if args.replay else None
    sizes = parse_sizes(args.sizes or (SMOKE_SIZES if args.smoke else DEFAULT_SIZES), len(pattern) if pattern else args.steps)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if any(d not in DTYPES for d in dtypes):
        raise SystemExit(f"--dtypes: choose from {list(DTYPES)}, got {dtypes}.")
    clock = Clock(device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} thread)"
    print(f"device: {name}, torch {torch.__version__}; model: hidden {config.hidden_size}, {config.num_hidden_layers} "
          f"layers, {config.num_attention_heads}/{config.num_key_value_heads} heads x {config.head_dim}, MLP "
          f"{config.intermediate_size}, vocab {config.vocab_size}; "
          f"{'checkpoint ' + args.checkpoint if args.checkpoint else 'random weights'}")
    print(f"sampler: flow Euler over reference_sigmas(shift {args.shift:g}), CFG {CFG_SCALE:g} (cond+uncond batched), "
          f"SeaCache at the paper's recipe (threshold 0.25, gate sea, order 1, max consecutive 2, residual history on {args.residual_storage})"
          + (f"; replaying {pattern}" if pattern else ""))

    rows, quality, skipped, warnings = [], [], [], []
    print_header()
    for label in dtypes:
        dtype = DTYPES[label]
        if device.type == "cuda":
            torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated() if device.type == "cuda" else 0
        model = build_model(config, dtype, device, args.seed, args.checkpoint)
        weights = (torch.cuda.memory_allocated() - before) if device.type == "cuda" else nbytes(model.parameters())
        for w, h, f, steps in sizes:
            tokens = prompt_tokens(config, tuple(args.prompt_tokens), device, args.checkpoint, (w, h, f))
            grid = latent_grid(config, w, h, f)
            gen = torch.Generator(device=device).manual_seed(args.seed + 1)
            noise = torch.randn((1, config.latent_channel, *grid), generator=gen, device=device)
            sigmas = reference_sigmas(steps, args.shift)
            # Warm-up: both paths (a computed and a reused step) on a 3-step schedule.
            warm = sample(model, tokens, noise, reference_sigmas(3, args.shift), torch.bfloat16, clock,
                          SeaCacheConfig(threshold=0.25, gate="sea"), pattern="FRC")
            per_step = max(warm.median("computed"), 1e-3) / 1e3
            estimate = per_step * (steps + steps) + warm.text_ms / 1e3 * 2
            if time.perf_counter() - t0 + estimate > args.budget_s:
                skipped.append(f"{w}x{h}x{f} {label} ({steps} steps, ~{estimate:.0f} s estimated)")
                continue
            text_kv = text_kv_measured(model, tokens)
            plain = sample(model, tokens, noise, sigmas, torch.bfloat16, clock)
            cache = SeaCacheConfig(threshold=0.25, gate="sea", residual_storage=args.residual_storage)
            cached = sample(model, tokens, noise, sigmas, torch.bfloat16, clock, cache, pattern)
            rows.append((f"{w}x{h}x{f}", label, weights, text_kv, plain, cached,
                         activation_bytes(config, 2 * config.token_count(*grid))))
            warnings += print_rows(rows[-1], device)  # now: a run stopped by its time limit keeps what it measured
            if args.checkpoint:
                quality.append((f"{w}x{h}x{f}", label, psnr(cached.latent, plain.latent), ssim(cached.latent, plain.latent)))
        del model
        gc.collect()
    for size, label, p, s in quality:
        print(f"quality {size} {label}: SeaCache vs uncached final latent PSNR {p:.2f} dB, SSIM {s:.4f} (latent space)")
    for size, label, *_rest, cached, _est in rows:
        print(f"timeline {size} {label}: {cached.timeline}")
    for line in warnings:
        print(line)
    for item in skipped:
        print(f"skipped (over --budget-s {args.budget_s:g}): {item}")
    print(f"total time {time.perf_counter() - t0:.0f} s")


def text_kv_measured(model, tokens) -> int:
    """Bytes of the cached text K/V for the prompt batch (compute dtype bf16)."""
    with torch.no_grad():
        kv = model.compute_text_kv(tokens, torch.bfloat16)
    return sum(nbytes(pair) for pair in kv.layers)


def print_header() -> None:
    """The results table's header (memory in GiB, measured on a GPU; '-' on the CPU, where the estimate stays)."""
    print("| size | weights | run | steps (full/reused) | computed step ms | reused step ms | gate ms (% of computed) "
          "| wall s | speedup measured / ideal | peak GiB | weights GiB | activations GiB (est.) | text K/V GiB "
          "| history GiB |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |", flush=True)


def print_rows(row, device) -> list[str]:
    """Print the uncached and SeaCache rows of one size and weight storage; return WARNING lines for a SeaCache
    run measured faster than its ideal."""
    warnings = []
    gpu = device.type == "cuda"
    fmt = lambda n: f"{n / GIB:.2f}" if gpu else "-"  # noqa: E731
    size, label, weights, text_kv, plain, cached, estimate = row
    for run in (plain, cached):
        computed = run.median("computed")
        gate = statistics.median(run.gate_ms) if run.gate_ms else float("nan")
        gate_cell = f"{gate:.2f} ({100 * gate / computed:.1f}%)" if run.gate_ms else "-"
        reused = run.median("reused")
        ideal = run.steps / run.full
        speed = f"{plain.wall_s / run.wall_s:.2f}x / {ideal:.2f}x" if run is cached else "1.00x / 1.00x"
        activations = run.peak - run.base - run.history - text_kv
        print(f"| {size} | {label} | {run.kind} | {run.steps} ({run.full}/{run.steps - run.full}) | {computed:.1f} | "
              f"{'-' if math.isnan(reused) else f'{reused:.1f}'} | {gate_cell} | {run.wall_s:.2f} | {speed} | "
              f"{fmt(run.peak)} | {weights / GIB:.2f} | {fmt(activations)} ({estimate / GIB:.2f}) | "
              f"{text_kv / GIB:.3f} | {run.history / GIB:.3f} |", flush=True)
        if run is cached and plain.wall_s / run.wall_s > ideal:
            warnings.append(f"WARNING: {size} {label}: measured {plain.wall_s / run.wall_s:.2f}x exceeds the ideal "
                            f"{ideal:.2f}x (the two runs were not measured alike)")
    return warnings


if __name__ == "__main__":
    main()
