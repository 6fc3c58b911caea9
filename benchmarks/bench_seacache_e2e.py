"""End-to-end SeaCache benchmark through ComfyUI's own sampler nodes (needs COMFYUI_PATH).

Runs a Cosmos3 T2V generation on a generated random-weight checkpoint (preset ``medium`` by default) on the
CPU, uncached and with SeaCache Apply at the published recipe's settings (the paper's gate, threshold 0.25,
order 1: the tests' ``APPLY_DEFAULTS``). Both variants get one warm-up run, then they take
turns (uncached, cached, cached, uncached, ...), so load from other processes on a shared machine hits them
alike. Prints the wall times (min / median / max), the measured ratio of each adjacent pair and of the
medians, the ideal ratio calls/full, and the per-call time of computed calls in both variants: when those
differ, the machine ran at a different speed during the two variants and the wall-time ratio is not a
property of SeaCache. A measured ratio above calls/full is physically impossible for this cache (a reused
call is never cheaper than free) and is flagged with a WARNING line.

    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.bench_seacache_e2e [--preset medium] [--steps 35] [--repeats 4]

``--model wan`` or ``--model flux`` benchmarks a tiny/medium random-weight Wan 2.1 T2V or Flux built from
ComfyUI's own model classes instead (see benchmarks/anymodel_bench.py).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time


def timed_calls(model, ns):
    """Clone ``model`` with a DIFFUSION_MODEL wrapper that records each model call's wall time."""
    times = []

    def wrapper(executor, *args, **kwargs):
        start = time.perf_counter()
        out = executor(*args, **kwargs)
        times.append(time.perf_counter() - start)
        return out

    timed = model.clone()
    timed.add_wrapper_with_key(ns.patcher_extension.WrappersMP.DIFFUSION_MODEL, "bench_timer", wrapper)
    return timed, times


def spread(values, scale=1.0, fmt="{:.2f}") -> str:
    """'min / median / max' of ``values`` times ``scale``."""
    v = [x * scale for x in values]
    return " / ".join(fmt.format(x) for x in (min(v), statistics.median(v), max(v)))


def pair_order(repeats: int) -> list[str]:
    """Run order after the warm-ups: ABBA blocks of uncached (A) and cached (B) runs, ``repeats`` of each."""
    order = []
    for r in range(repeats):
        order += ["plain", "cached"] if r % 2 == 0 else ["cached", "plain"]
    return order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="medium", choices=["tiny", "medium"])
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--length", type=int, default=33)
    parser.add_argument("--repeats", type=int, default=4, help="timed runs of each variant (after one warm-up each)")
    parser.add_argument("--model", default="cosmos3", choices=["cosmos3", "wan", "flux"], help="model family to benchmark")
    args = parser.parse_args()
    comfy_path = os.environ.get("COMFYUI_PATH")
    if not comfy_path:
        sys.exit("COMFYUI_PATH is not set: this benchmark runs through a real ComfyUI checkout.")
    if args.repeats < 1:
        sys.exit("--repeats must be at least 1.")

    import torch

    torch.set_flush_denormal(True)  # random-weight trajectories can drift into slow denormal floats in one variant
    from seacache_testing import comfyui_harness
    from benchmarks.anymodel_bench import run_core_model, settings_text
    from seacache_testing.comfy_runs import APPLY_DEFAULTS, Tiny
    from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

    ns = comfyui_harness.comfy_session(comfy_path)
    if args.model != "cosmos3":
        return run_core_model(ns, args.model, args.preset, args.steps, args.repeats)
    root = tempfile.mkdtemp(prefix="seacache-bench-")
    make_tiny_checkpoint(os.path.join(root, f"cosmos3-{args.preset}"), preset=args.preset)
    ns.folder_paths.add_model_folder_path("diffusion_models", root, is_default=True)
    pack = comfyui_harness.load_pack_with_comfyui_loader(ns)
    model, vae, text, _audio_vae = ns.run_node("SeaCacheCosmos3Loader", checkpoint=f"cosmos3-{args.preset}", weight_dtype="default").outputs
    run = Tiny(ns, pack, f"cosmos3-{args.preset}", model, vae, text)
    size = dict(width=args.width, height=args.height, length=args.length)
    positive = run.encode("a red fox running through deep fresh snow at dawn, cinematic, detailed fur")
    negative = run.encode("", negative=True)
    latent = run.empty(**size)
    cached_model = run.seacache()
    variants = {"plain": model, "cached": cached_model}

    def sample(kind):
        timed, times = timed_calls(variants[kind], ns)
        start = time.perf_counter()
        out = run.sample(timed, positive, negative, latent, steps=args.steps)
        wall = time.perf_counter() - start
        decisions = ["computed"] * len(times)
        if kind == "cached":
            decisions = [r["decision"] for r in cached_model.model_options["transformer_options"]["seacache_settings"].last_run["records"]]
        return dict(wall=wall, times=times, decisions=decisions, out=out)

    sample("plain")  # warm-ups, one per variant (allocator, thread pools, the gate's first call)
    sample("cached")
    runs = {"plain": [], "cached": []}
    order = pair_order(args.repeats)
    for kind in order:
        runs[kind].append(sample(kind))
    report = cached_model.model_options["transformer_options"]["seacache_settings"].last_run
    decisions = [r["decision"] for r in report["records"]]
    ideal = report["speedup"]

    wall_plain = [r["wall"] for r in runs["plain"]]
    wall_cached = [r["wall"] for r in runs["cached"]]
    pair_ratios = [p["wall"] / c["wall"] for p, c in zip(runs["plain"], runs["cached"])]
    plain_calls = [t for r in runs["plain"] for t in r["times"]]
    computed_calls = [t for r in runs["cached"] for t, d in zip(r["times"], r["decisions"]) if d != "reused"]
    reused_calls = [t for r in runs["cached"] for t, d in zip(r["times"], r["decisions"]) if d == "reused"]
    full_ms = statistics.median(computed_calls) * 1e3
    plain_ms = statistics.median(plain_calls) * 1e3
    reused_ms = statistics.median(reused_calls) * 1e3 if reused_calls else float("nan")
    measured = statistics.median(wall_plain) / statistics.median(wall_cached)
    # Wall time the cached run would take if its calls cost what the uncached run's calls cost: the
    # ratio SeaCache itself explains, free of the machine's speed changing between the two variants.
    calls, full, reused = report["calls"], report["ran"], report["reused"]
    model_ratio = (calls * plain_ms) / (full * plain_ms + reused * reused_ms) if reused_calls else 1.0
    diff = (runs["cached"][-1]["out"] - runs["plain"][-1]["out"]).abs().max() / runs["plain"][-1]["out"].abs().max()

    cfg = model.model.diffusion_model.config
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, "
          f"load average {load:.2f} on {os.cpu_count()} cores, denormals flushed")
    print(f"model: preset {args.preset} (hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers), "
          f"latent {list(latent['samples'].shape)}, sampler uni_pc_bh2, CFG 6 (cond+uncond batched), "
          f"{args.steps} steps, SeaCache Apply at the published recipe's settings: {settings_text(APPLY_DEFAULTS)}")
    print(f"runs: one warm-up each, then {args.repeats} of each variant in ABBA order ({' '.join('U' if k == 'plain' else 'S' for k in order)})")
    print(f"steps: {args.steps}   gated calls: {calls}   reused: {reused}   computed: {full}")
    print(f"wall time min / median / max: uncached {spread(wall_plain)} s, SeaCache {spread(wall_cached)} s")
    print(f"measured speedup (median / median): {measured:.2f}x   per adjacent pair min / median / max: "
          f"{spread(pair_ratios)}   ideal (calls/full): {ideal:.2f}x")
    print(f"per model call (median over all runs): uncached {plain_ms:.1f} ms, SeaCache computed {full_ms:.1f} ms, "
          f"SeaCache reused {reused_ms:.2f} ms ({100 * reused_ms / full_ms:.1f}% of a computed one)")
    print(f"per-call min / median / max ms: uncached {spread(plain_calls, 1e3, '{:.1f}')}, "
          f"SeaCache computed {spread(computed_calls, 1e3, '{:.1f}')}")
    print(f"speedup from per-call times (uncached call cost for every computed call): {model_ratio:.2f}x")
    print(f"max relative difference of the final latent vs uncached: {diff:.3f} (random weights: not a quality measure)")
    print("timeline:", " ".join({"computed": "C", "reused": "R", "forced": "F"}[d] for d in decisions))
    for label, value in (("measured speedup (medians)", measured), ("largest adjacent-pair ratio", max(pair_ratios))):
        if value > ideal:
            print(f"WARNING: {label} {value:.2f}x exceeds the ideal {ideal:.2f}x: the two variants did not run at the "
                  f"same machine speed (computed calls: uncached {plain_ms:.1f} ms vs SeaCache {full_ms:.1f} ms "
                  "median); trust the per-call figures, rerun on an idle machine or with more --repeats.")


if __name__ == "__main__":
    main()
