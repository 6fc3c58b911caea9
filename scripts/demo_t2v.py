"""SeaCache demo: a Cosmos3 text-to-video run with SeaCache on a generated random-weight checkpoint.

With ``COMFYUI_PATH`` pointing at a ComfyUI checkout, the run goes through this pack's nodes and ComfyUI's own
sampler (SamplerCustomAdvanced + CFGGuider + uni_pc_bh2); without it, through the plain-torch model and a small
flow-matching Euler sampler. Either way it prints the step timeline, the estimated speedup (calls / calls that ran
the stack) and the measured one: the wall time of whole uncached and SeaCache sampling runs after a short
warm-up, denormal floats flushed as the benchmarks do. With ``--repeats 2`` or more the runs interleave (uncached,
SeaCache, SeaCache, uncached, ...) so that a machine whose load drifts slows both alike; without ComfyUI it also
prints the median cost of an uncached, a computed and a reused model call and the speedup they give, which load
bursts from other jobs on the machine barely move. The default `medium`
preset (hidden 512, 8 layers) is small enough for a CPU, yet its generator stack dominates a model call as
Cosmos3-Nano's does; on `tiny` the stack costs less than the rest of a call, so the measured speedup stays well
below the estimate. Random weights: the video is noise; this shows the machinery and its timing, not image quality.

    python scripts/demo_t2v.py [--preset tiny|medium] [--steps 35] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if __package__ in (None, ""):  # entry point run as a file: the repository root on the import path
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint  # noqa: E402
from seacache_testing.seacache_host import SeaCachedCosmos3  # noqa: E402

PROMPT = "a red fox running through deep fresh snow at dawn"
SIZE = dict(width=256, height=256, length=33)
WARMUP_STEPS = 2


def interleaved_times(sample_uncached, sample_seacache, steps: int, repeats: int) -> tuple[float, float]:
    """Wall seconds (uncached, SeaCache) of ``repeats`` runs of ``steps`` steps per variant, summed, interleaved
    U S, S U, ... after a ``WARMUP_STEPS`` SeaCache run (allocator, threads, filter gain). Each sampler takes the
    step count."""
    sample_seacache(WARMUP_STEPS)
    totals = {"uncached": 0.0, "seacache": 0.0}
    for i in range(repeats):
        pair = [("uncached", sample_uncached), ("seacache", sample_seacache)]
        for name, sample in reversed(pair) if i % 2 else pair:
            start = time.perf_counter()
            sample(steps)
            totals[name] += time.perf_counter() - start
    return totals["uncached"], totals["seacache"]


def run_comfyui(comfy_path: str, checkpoint_root: str, name: str, steps: int, repeats: int) -> tuple[tuple, dict]:
    """Uncached and SeaCache runs through ComfyUI nodes; returns ((uncached s, SeaCache s), SeaCache report)."""
    from seacache_testing import comfyui_harness
    from seacache_testing.comfy_runs import Tiny

    ns = comfyui_harness.comfy_session(comfy_path)
    ns.folder_paths.add_model_folder_path("diffusion_models", checkpoint_root, is_default=True)
    pack = comfyui_harness.load_pack_with_comfyui_loader(ns)
    run = Tiny(ns, pack, name, *ns.run_node("SeaCacheCosmos3Loader", checkpoint=name, weight_dtype="default").outputs)
    print(f"ComfyUI {ns.version}: Cosmos3 Loader -> SeaCache Apply -> SamplerCustomAdvanced (uni_pc_bh2, CFG 6)")
    positive, negative = run.encode(PROMPT), run.encode("", negative=True)
    latent, cached = run.empty(**SIZE), run.seacache()
    last = {}

    def sampler(model):
        def sample(n):
            last["samples"] = run.sample(model, positive, negative, latent, steps=n)
        return sample

    times = interleaved_times(sampler(run.model), sampler(cached), steps, repeats)
    print(run.stats(cached, last["samples"]).outputs[1])
    return times, cached.model_options["transformer_options"]["seacache_settings"].last_run


def run_plain_torch(checkpoint_root: str, name: str, steps: int, repeats: int) -> tuple[tuple, dict]:
    """The same job without ComfyUI: plain-torch model, Euler flow sampler with CFG, a SeaCacheRun."""
    from cosmos3 import (TEXT_KV_CACHE_KEY, Cosmos3Transformer, TextKVCache, load_weights, read_config,
                         reference_sigmas, shard_files)
    from cosmos3.tokenizer import Cosmos3Tokenizer
    from seacache_core import SeaCacheConfig, SeaCacheRun

    path = os.path.join(checkpoint_root, name)
    model = Cosmos3Transformer(read_config(path)).eval()
    load_weights(model, shard_files(path))
    tok = Cosmos3Tokenizer.from_folder(path)
    common = dict(width=SIZE["width"], height=SIZE["height"], frames=SIZE["length"], fps=24.0)
    ids = [tok.encode(PROMPT, negative=False, **common), tok.encode("", negative=True, **common)]
    tokens = torch.full((2, max(map(len, ids))), -1, dtype=torch.long)
    for row, seq in enumerate(ids):
        tokens[row, : len(seq)] = torch.tensor(seq)
    print("ComfyUI not found (set COMFYUI_PATH to use it): plain-torch model, flow Euler sampler, CFG 6")

    def sample(new_run, steps):
        sigmas = reference_sigmas(steps, 10.0)
        shape = (1, 48, (SIZE["length"] - 1) // 4 + 1, SIZE["height"] // 16, SIZE["width"] // 16)
        x = torch.randn(shape, generator=torch.Generator().manual_seed(3))
        options = {TEXT_KV_CACHE_KEY: TextKVCache()}
        model.call_gen_stack = SeaCachedCosmos3(model, new_run and new_run(sigmas))
        seconds = []
        with torch.no_grad():
            for i in range(steps):
                start = time.perf_counter()
                v = model(x.expand(2, -1, -1, -1, -1), sigmas[i].expand(2), tokens, fps=24.0, transformer_options=options)
                seconds.append(time.perf_counter() - start)
                x = x + (sigmas[i + 1] - sigmas[i]) * (v[1:] + 6.0 * (v[:1] - v[1:]))
        return seconds

    last, calls = {}, {"uncached": [], "computed": [], "reused": []}  # seconds per model call of the timed runs

    def sample_uncached(n):
        seconds = sample(None, n)
        if n == steps:
            calls["uncached"] += seconds

    def sample_seacache(n):
        def start(sigmas):  # the paper's recipe, as published (no floor on the steps: --steps 4 reuses too)
            last["run"] = SeaCacheRun(SeaCacheConfig(threshold=0.25, gate="sea", min_steps=0), sigmas)
            return last["run"]

        seconds = sample(start, n)
        if n == steps:
            for record, second in zip(last["run"].stats.records, seconds):
                calls["reused" if record.decision == "reused" else "computed"].append(second)

    times = interleaved_times(sample_uncached, sample_seacache, steps, repeats)
    stats = last["run"].stats
    print(stats.summary())
    median = {kind: statistics.median(values) for kind, values in calls.items() if values}
    if len(median) == 3:  # a run with reused calls: the speedup the median call costs give, robust to load bursts
        seacache_s = stats.ran * median["computed"] + stats.reused * median["reused"]
        from_medians = stats.calls * median["uncached"] / seacache_s
        print(f"median model call: uncached {median['uncached'] * 1e3:.0f} ms, SeaCache computed "
              f"{median['computed'] * 1e3:.0f} ms, reused {median['reused'] * 1e3:.0f} ms -> {from_medians:.2f}x")
    return times, last["run"].report("completed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="medium", choices=["tiny", "medium"])
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each variant, interleaved")
    parser.add_argument("--chart", help="also save the SeaCache timeline chart (PNG) here")
    args = parser.parse_args()
    torch.set_flush_denormal(True)  # random-weight trajectories can drift into slow denormal floats in one variant
    root = tempfile.mkdtemp(prefix="seacache-demo-")
    name = f"cosmos3-{args.preset}"
    make_tiny_checkpoint(os.path.join(root, name), preset=args.preset)
    comfy_path = os.environ.get("COMFYUI_PATH")
    if comfy_path:
        times, report = run_comfyui(comfy_path, root, name, args.steps, args.repeats)
    else:
        times, report = run_plain_torch(root, name, args.steps, args.repeats)
    plain, cached = times
    print(f"{args.steps} steps, {SIZE['width']}x{SIZE['height']}x{SIZE['length']} frames, preset {args.preset}, "
          f"{args.repeats} sampling run(s) each: wall time uncached {plain:.1f} s, SeaCache {cached:.1f} s -> "
          f"measured {plain / cached:.2f}x; estimated (calls / calls that ran the stack) {report['speedup']:.2f}x")
    if args.chart:
        from seacache_testing import comfyui_harness

        chart = comfyui_harness.import_pack_module("nodes.seacache.chart")
        chart.render_timeline(report).save(args.chart)
        print(f"timeline chart saved to {args.chart}")


if __name__ == "__main__":
    main()
