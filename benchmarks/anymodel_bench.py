"""Uncached vs SeaCache on ComfyUI core models (Wan 2.1 T2V, Flux) built tiny or medium with random weights by
seacache_testing/tiny_comfy_models.py, through ComfyUI's own sampler nodes on the CPU. Used by
``bench_seacache_e2e.py --model wan|flux``; prints the measured wall-time ratio next to the ideal calls/full."""

from __future__ import annotations

import statistics
import time

import torch

MODELS = {"wan": "wan21_t2v", "flux": "flux"}


def settings_text(settings: dict) -> str:
    """SeaCache Apply's inputs as the benchmark prints them (what was measured, read from the settings used)."""
    return ", ".join(f"{name} {value}" for name, value in settings.items())


def run_core_model(ns, model: str, preset: str, steps: int, repeats: int) -> None:
    """Load the pack, build the model, time uncached and SeaCache runs (after one warm-up each), print the result.

    Denormal floats are flushed to zero: random-weight trajectories drift into them, and their slow CPU path
    made one run (uncached Flux medium) 2x slower per call than the other, a measured speedup above the ideal."""
    torch.set_flush_denormal(True)
    from seacache_testing import comfyui_harness
    from seacache_testing import tiny_comfy_models
    from seacache_testing.anymodel_runs import APPLY_DEFAULTS, last_report, sample, seacache

    comfyui_harness.load_pack_with_comfyui_loader(ns)
    name = MODELS[model]
    spec = (tiny_comfy_models.MEDIUM if preset == "medium" else tiny_comfy_models.SPECS)[name]
    plain_model = tiny_comfy_models.build(name, medium=preset == "medium")
    cached_model = seacache(ns, plain_model)

    def timed(m):
        start = time.perf_counter()
        out = sample(ns, m, spec, steps=steps, cfg=5.0, sampler="euler")
        return time.perf_counter() - start, out

    timed(plain_model)
    timed(cached_model)
    plain = [timed(plain_model) for _ in range(repeats)]
    cached = [timed(cached_model) for _ in range(repeats)]
    report = last_report(cached_model)
    t_plain = statistics.median(t for t, _ in plain)
    t_cached = statistics.median(t for t, _ in cached)
    params = sum(p.numel() for p in plain_model.model.diffusion_model.parameters())
    diff = (cached[-1][1] - plain[-1][1]).abs().max() / plain[-1][1].abs().max()
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} CPU threads, denormals flushed")
    print(f"model: {model} ({type(plain_model.model.diffusion_model).__name__}, preset {preset}, {params / 1e6:.1f}M params), "
          f"latent {[1, *spec.latent]}, euler, CFG 5 (cond+uncond batched), {steps} steps, SeaCache Apply: {settings_text(APPLY_DEFAULTS)}")
    print(f"seam: {report['seam']}")
    print(f"steps: {steps}   gated calls: {report['calls']}   reused: {report['reused']}   computed: {report['ran']}")
    print(f"wall time: uncached {t_plain:.2f} s, SeaCache {t_cached:.2f} s (median of {repeats})")
    print(f"measured speedup: {t_plain / t_cached:.2f}x   ideal (calls/full): {report['speedup']:.2f}x")
    print(f"max relative difference of the final latent vs uncached: {diff:.3f} (random weights: not a quality measure)")
    print("timeline:", " ".join({"computed": "C", "reused": "R", "forced": "F"}[r["decision"]] for r in report["records"]))
