"""Hashes of final latents and SeaCache reports over a fixed set of runs through ComfyUI, to show that a refactor
changed no output: run it on two commits and compare.

    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.reference_runs --save before.json   # on the old commit
    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.reference_runs --compare before.json
    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.reference_runs --quick                 # a few runs (the suite's)

The runs: the tiny Cosmos3 at SeaCache Apply's defaults, the paper's gate, speed targets 2 and 3 (no cap), cpu
residuals with order 2, a reuse window, a batch of two with euler, heun; with sound where this ComfyUI has
audio-video latents; ComfyUI's tiny Wan 2.1 T2V/I2V, Flux, HunyuanVideo, LTX-Video and Qwen-Image at the defaults,
the paper's gate and speed target 2; the composition cases (block patches, skip-layer guidance, context windows).
Each line: the run, the first 16 hex digits of the final latent's SHA-256 (float32 bytes), the same of the report
(its summary text left out), and the report's counts."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

DEFAULTS = dict(threshold=0.13, residual_order="auto", gate="sea same-sigma")
COSMOS3 = {
    "defaults": {},
    "paper": dict(gate="sea", threshold=0.25),
    "speed2": dict(speedup=2.0),
    "speed3_nocap": dict(speedup=3.0, max_consecutive=-1),
    "cpu_o2": dict(residual_storage="cpu", residual_order="2", threshold=0.3),
    "window": dict(start_percent=0.2, end_percent=0.8, threshold=0.4, residual_order="0"),
}
FAMILIES = ("wan21_t2v", "flux", "hunyuan_video", "ltxv", "qwen_image", "ltxav", "wan21_i2v")


def digest(tensor) -> str:
    if not isinstance(tensor, torch.Tensor):  # an audio-video latent: its streams flattened and joined per item
        tensor = torch.cat([s.reshape(s.shape[0], -1) for s in tensor.unbind()], 1)
    return hashlib.sha256(tensor.detach().contiguous().float().numpy().tobytes()).hexdigest()[:16]


def described(out, model) -> str:
    report = dict(model.model_options["transformer_options"]["seacache_settings"].last_run)
    report.pop("summary", None)
    text = json.dumps(report, sort_keys=True, default=str)
    return (f"{digest(out)} {hashlib.sha256(text.encode()).hexdigest()[:16]} calls={report['calls']} "
            f"reused={report['reused']} uncached={report['uncached_calls']} guidance={report['guidance_calls']}/"
            f"{report['guidance_followed']}/{report['guidance_reused']}")


def runs(quick: bool) -> dict[str, str]:
    from seacache_testing import comfyui_harness, tiny_comfy_models
    from seacache_testing import composition_cases as cases
    from seacache_testing.anymodel_runs import sample, seacache
    from seacache_testing.comfy_runs import load_tiny

    class Folders:
        def mktemp(self, name):
            return Path(tempfile.mkdtemp(prefix=name))

    ns = comfyui_harness.comfy_session(os.environ[comfyui_harness.ENV_VAR], output_root=Path(tempfile.mkdtemp()))
    out: dict[str, str] = {}
    tiny = load_tiny(ns, Folders())
    for name, settings in list(COSMOS3.items())[: 2 if quick else None]:
        model = tiny.seacache(**{**DEFAULTS, **settings})
        out[f"cosmos3/{name}"] = described(tiny.sample(model, steps=12), model)
    if quick:
        return out
    model = tiny.seacache(**DEFAULTS)
    out["cosmos3/batch2_euler"] = described(tiny.sample(model, steps=12, latent=tiny.empty(batch_size=2), sampler="euler"), model)
    out["cosmos3/heun"] = described(tiny.sample(model, steps=8, sampler="heun"), model)
    if "SeaCacheCosmos3EmptyAVLatent" in ns.nodes.NODE_CLASS_MAPPINGS and importlib_has("comfy.nested_tensor"):
        sound = load_tiny(ns, Folders(), preset="tiny-sound")
        latent = ns.run_node("SeaCacheCosmos3EmptyAVLatent", width=64, height=64, length=9, fps=24.0, batch_size=1,
                             audio_vae=sound.audio_vae).outputs[0]
        model = sound.seacache(**DEFAULTS)
        out["cosmos3_sound/defaults"] = described(sound.sample(model, latent=latent, steps=10), model)
    for family in FAMILIES:
        if tiny_comfy_models.missing(family):
            continue
        built, spec = tiny_comfy_models.build(family), tiny_comfy_models.SPECS[family]
        for name, settings in (("defaults", DEFAULTS), ("paper", dict(gate="sea", threshold=0.25)),
                               ("speed2", {**DEFAULTS, "speedup": 2.0})):
            model = seacache(ns, built, **settings)
            out[f"{family}/{name}"] = described(sample(ns, model, spec, steps=12), model)
    ns.load_extra_nodes("nodes_slg.py", "nodes_context_windows.py")
    wan = tiny_comfy_models.build(cases.MODEL)
    for case in cases.CASES:
        slot = {}

        def apply(model):
            slot["model"] = seacache(ns, model, **DEFAULTS)
            return slot["model"]

        result = sample(ns, case.build(ns, wan, apply), cases.spec_for(case), steps=case.steps, cfg=cases.CFG)
        out[f"wan/{case.name}"] = described(result, slot["model"])
    return out


def importlib_has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="two Cosmos3 runs only (the suite's smoke run)")
    parser.add_argument("--save", help="write the hashes to this JSON file")
    parser.add_argument("--compare", help="compare with the hashes saved in this JSON file; exit 1 on a difference")
    args = parser.parse_args(argv)
    out = runs(args.quick)
    for name, line in out.items():
        print(f"{name}: {line}")
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.compare:
        before = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        differ = [name for name in before if before[name] != out.get(name)]
        print(f"{len(before)} runs compared, {len(differ)} differ" + "".join(f"\n  differs: {n}" for n in differ))
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
