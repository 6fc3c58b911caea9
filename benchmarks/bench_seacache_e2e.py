"""End-to-end SeaCache benchmark through ComfyUI's own sampler nodes (needs COMFYUI_PATH).

Runs a Cosmos3 T2V generation on a generated random-weight checkpoint (preset ``medium`` by default) on the
CPU twice: uncached and with SeaCache Apply at its defaults, and prints steps, reused calls, the measured
wall-time ratio, the ideal ratio calls/full, and what one reused call costs relative to a computed one.

    COMFYUI_PATH=/path/to/ComfyUI python benchmarks/bench_seacache_e2e.py [--preset medium] [--steps 35]

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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "tests"), os.path.join(ROOT, "scripts"), os.path.join(ROOT, "benchmarks")]


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="medium", choices=["tiny", "medium"])
    parser.add_argument("--steps", type=int, default=35)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--height", type=int, default=256)
    parser.add_argument("--length", type=int, default=33)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--model", default="cosmos3", choices=["cosmos3", "wan", "flux"], help="model family to benchmark")
    args = parser.parse_args()
    comfy_path = os.environ.get("COMFYUI_PATH")
    if not comfy_path:
        sys.exit("COMFYUI_PATH is not set: this benchmark runs through a real ComfyUI checkout.")

    import torch

    import comfyui_harness
    from comfy_runs import Tiny
    from make_tiny_checkpoint import make_tiny_checkpoint

    ns = comfyui_harness.comfy_session(comfy_path)
    if args.model != "cosmos3":
        from anymodel_bench import run_core_model

        return run_core_model(ns, args.model, args.preset, args.steps, args.repeats)
    root = tempfile.mkdtemp(prefix="seacache-bench-")
    make_tiny_checkpoint(os.path.join(root, f"cosmos3-{args.preset}"), preset=args.preset)
    ns.folder_paths.add_model_folder_path("diffusion_models", root, is_default=True)
    pack = comfyui_harness.load_pack_with_comfyui_loader(ns)
    model, vae, text = ns.run_node("SeaCacheCosmos3Loader", checkpoint=f"cosmos3-{args.preset}", weight_dtype="default").outputs
    run = Tiny(ns, pack, f"cosmos3-{args.preset}", model, vae, text)
    size = dict(width=args.width, height=args.height, length=args.length)
    positive = run.encode("a red fox running through deep fresh snow at dawn, cinematic, detailed fur", **size)
    negative = run.encode("", negative=True, **size)
    latent = run.empty(**size)
    cached_model = run.seacache()

    def sample(m):
        timed, times = timed_calls(m, ns)
        start = time.perf_counter()
        out = run.sample(timed, positive, negative, latent, steps=args.steps)
        return time.perf_counter() - start, times, out

    sample(model)  # warm-up of both paths (allocator, thread pools, the gate's first call)
    sample(cached_model)
    plain = [sample(model) for _ in range(args.repeats)]
    cached = [sample(cached_model) for _ in range(args.repeats)]
    report = cached_model.model_options["transformer_options"]["seacache"].last_run
    decisions = [r["decision"] for r in report["records"]]
    t_plain = statistics.median(p[0] for p in plain)
    t_cached = statistics.median(c[0] for c in cached)
    call_times = cached[-1][1]
    full_calls = [t for t, d in zip(call_times, decisions) if d != "reused"]
    reused_calls = [t for t, d in zip(call_times, decisions) if d == "reused"]
    full_ms = statistics.median(full_calls) * 1e3
    reused_ms = statistics.median(reused_calls) * 1e3 if reused_calls else float("nan")
    diff = (cached[-1][2] - plain[-1][2]).abs().max() / plain[-1][2].abs().max()

    cfg = model.model.diffusion_model.config
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"model: preset {args.preset} (hidden {cfg.hidden_size}, {cfg.num_hidden_layers} layers), "
          f"latent {list(latent['samples'].shape)}, sampler uni_pc_bh2, CFG 6 (cond+uncond batched), "
          f"{args.steps} steps, SeaCache defaults (threshold 0.25, order 1, max consecutive 2)")
    print(f"steps: {args.steps}   gated calls: {report['calls']}   reused: {report['reused']}   computed: {report['full']}")
    print(f"wall time: uncached {t_plain:.2f} s, SeaCache {t_cached:.2f} s (median of {args.repeats})")
    print(f"measured speedup: {t_plain / t_cached:.2f}x   ideal (calls/full): {report['speedup']:.2f}x")
    print(f"model call: computed {full_ms:.1f} ms, reused {reused_ms:.2f} ms "
          f"-> a reused call costs {100 * reused_ms / full_ms:.1f}% of a computed one")
    print(f"max relative difference of the final latent vs uncached: {diff:.3f} (random weights: not a quality measure)")
    print("timeline:", " ".join({"computed": "C", "reused": "R", "forced": "F"}[d] for d in decisions))


if __name__ == "__main__":
    main()
