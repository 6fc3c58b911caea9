"""What SeaCache Apply at its defaults does on few-step sampling (4, 6 and 8 steps, CFG 1, euler), through ComfyUI,
against the uncached run at the same steps: calls reused, the final latent's error, and the wall cost of the gate.

Two trained proxies (not distilled models: none can be had here; ``benchmarks/train_proxy.py``):

- the Wan 2.1 natural proxy (ComfyUI's own ``WanModel``, loaded by UNETLoader), ModelSamplingSD3 at shift 5 and 8
  and BasicScheduler "simple", as a Wan graph with a lightx2v-style LoRA samples it;
- the Cosmos3 natural proxy written as a **4-step checkpoint** (``tiny-t2i-4step`` layout: the distilled sigmas of
  Cosmos3's 4-step checkpoints, [1, 0.9375, 0.8333, 0.625] after their scheduler's shift 5) and loaded by this pack's
  Cosmos3 Loader; 4 steps take the Cosmos3 Distilled Scheduler, 6 and 8 the Cosmos3 Scheduler at shift 5 (the
  distilled schedule is its 4-step case) and 10.

Per cell: the reused calls (mean and range over the pairs), the relative L2 error of the final latent against the
uncached run (mean and max; 0 where nothing was reused), and the median wall time of a run uncached, with the gate
running but never reusing (threshold 0: what the gate costs) and at the defaults. Wall times on a shared CPU are
noisy: compare the ratios. The error numbers are deterministic.

    COMFYUI_PATH=... python -m benchmarks.bench_few_steps            # 6 prompt/seed pairs per cell
    COMFYUI_PATH=... python -m benchmarks.bench_few_steps --smoke    # 1 pair, 4 steps: runs in seconds
    COMFYUI_PATH=... python -m benchmarks.bench_few_steps --min-steps 0    # "the defaults" without the few-steps floor
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch

from benchmarks.bench_peers import Cosmos3Proxy, WanProxy, comfy
from seacache_testing import quality_proxy as proxy
from seacache_testing.anymodel_runs import last_report
from seacache_testing.composition_cases import with_defaults

STEPS = (4, 6, 8)
WAN_SHIFTS = (5.0, 8.0)
COSMOS3_SHIFTS = (5.0, 10.0)
DISTILLED = "4-step distilled"  # the schedule label of the Cosmos3 4-step checkpoint's own sigmas


class FourStepCosmos3Proxy(Cosmos3Proxy):
    """The Cosmos3 natural proxy in a 4-step checkpoint's layout (its distilled sigmas in
    ``modular_model_index.json``), loaded by the Cosmos3 Loader."""

    def load(self, ns, folder: str) -> None:
        from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

        weights = proxy.load_proxy(self.data.folder, data=self.data)
        checkpoint = os.path.join(folder, "cosmos3-proxy-natural-4step")
        make_tiny_checkpoint(checkpoint, "tiny-t2i-4step", transformer_weights=(self.data.config(), weights.state_dict()),
                             shards=1)
        ns.folder_paths.add_model_folder_path("diffusion_models", folder, is_default=True)
        self.model = ns.run_node("SeaCacheCosmos3Loader", checkpoint=os.path.basename(checkpoint),
                                 weight_dtype="default").outputs[0]

    def few_step_sigmas(self, ns, model, schedule, steps: int):
        if schedule == DISTILLED:
            return ns.run_node("SeaCacheCosmos3DistilledScheduler", model=model).outputs[0]
        return self.sigmas(ns, model, schedule, steps)


class FewStepWanProxy(WanProxy):
    def few_step_sigmas(self, ns, model, schedule, steps: int):
        return self.sigmas(ns, model, schedule, steps)


def cells(arch, smoke: bool):
    """(schedule, steps) of one proxy: a shift, or the 4-step checkpoint's own schedule."""
    if isinstance(arch, FourStepCosmos3Proxy):
        grid = [(DISTILLED, 4)] + [(shift, steps) for shift in COSMOS3_SHIFTS for steps in STEPS if steps > 4]
    else:
        grid = [(shift, steps) for shift in WAN_SHIFTS for steps in STEPS]
    return grid[:1] if smoke else grid


def run(ns, arch, model, sigmas, pair: int):
    """(final latent, wall seconds) of one CFG-1 euler run of ``pair``'s prompt and seed."""
    positive, negative, latent = arch.inputs(ns, pair, "t2v")
    guider = ns.run_node("CFGGuider", model=model, positive=positive, negative=negative, cfg=1.0).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=pair).outputs[0]
    start = time.perf_counter()
    out = ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas,
                      latent_image=latent).outputs[0]["samples"]
    return out, time.perf_counter() - start


def measure(ns, arch, schedule, steps: int, pairs: int, min_steps: int | None = None) -> dict:
    """One cell: every pair uncached, then with the gate at threshold 0 (must be exact), then at the defaults; each
    variant's runs in a block after one warm-up run, so ComfyUI loads each MODEL once and no timed run pays for it."""
    model = arch.model_for(ns, 5.0 if schedule == DISTILLED else schedule)
    sigmas = arch.few_step_sigmas(ns, model, schedule, steps)
    variants = {"uncached": model,
                "gate": with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "1"}, model=model, threshold=0.0),
                "defaults": with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "2"}, model=model,
                                          **({} if min_steps is None else {"min_steps": min_steps}))}
    outs, walls = {}, {}
    for name, variant in variants.items():
        run(ns, arch, variant, sigmas, 0)  # warm-up
        results = []
        for pair in range(pairs):
            out, wall = run(ns, arch, variant, sigmas, pair)
            results.append((out, wall, last_report(variant) if variant is not model else None))
        outs[name] = results
        walls[name] = statistics.median(wall for _, wall, _ in results)
    errors, reused, nothing = [], [], set()
    for pair, ((plain, _, _), (exact, _, _), (cached, _, report)) in enumerate(zip(*outs.values())):
        if not torch.equal(exact, plain) or not torch.isfinite(cached).all():
            raise AssertionError(f"{arch.name} {schedule} {steps} steps pair {pair}: threshold 0 is not exact or "
                                 "the defaults' output is not finite")
        errors.append(float((cached - plain).norm() / plain.norm()))
        reused.append(report["reused"])
        nothing.update(line for line in report["summary"].splitlines() if line.startswith("reused nothing"))
    return {"reused": reused, "errors": errors, "wall": walls, "nothing": sorted(nothing)}


def row(arch, schedule, steps: int, cell: dict) -> str:
    reused, errors, wall = cell["reused"], cell["errors"], cell["wall"]
    label = schedule if schedule == DISTILLED else f"shift {schedule:g}"
    return (f"| {arch.name} | {label} | {steps} | {statistics.mean(reused):.2f} ({min(reused)}-{max(reused)}) of "
            f"{steps} | {statistics.mean(errors):.4f} / {max(errors):.4f} | {wall['uncached']:.3f} | "
            f"{wall['gate'] / wall['uncached']:.3f}x | {wall['defaults'] / wall['uncached']:.3f}x |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6, help="prompt/seed pairs per cell")
    parser.add_argument("--smoke", action="store_true", help="1 pair, the first cell of each proxy")
    parser.add_argument("--min-steps", type=int, default=None, help="SeaCache Apply's min_steps (default: its own)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    ns = comfy()
    pairs = 1 if args.smoke else args.pairs
    print("| proxy | schedule | steps | reused at the defaults (mean, range) | error mean / max | uncached s "
          "(median) | gate at threshold 0 / uncached | defaults / uncached |")
    print("| --- | --- | ---: | --- | --- | ---: | ---: | ---: |")
    nothing = []
    with tempfile.TemporaryDirectory() as folder:
        for arch in (FewStepWanProxy(proxy.WAN_NATURAL), FourStepCosmos3Proxy(proxy.NATURAL, "Cosmos3 natural", True)):
            arch.load(ns, folder)
            for schedule, steps in cells(arch, args.smoke):
                cell = measure(ns, arch, schedule, steps, pairs, args.min_steps)
                print(row(arch, schedule, steps, cell), flush=True)
                nothing += [f"{arch.name}, {steps} steps: {line}" for line in cell["nothing"]]
    print("\nSeaCache Stats' line where a run reused nothing:")
    for line in nothing or ["(every run reused)"]:
        print(f"- {line}")


if __name__ == "__main__":
    main()
