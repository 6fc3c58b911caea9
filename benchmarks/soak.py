"""Soak SeaCache on a real ComfyUI server: ``main.py --cpu`` on 127.0.0.1, this pack linked into a temp
custom_nodes, N prompts queued over HTTP that mix tiny Cosmos3, tiny Cosmos3 with sound (ComfyUI with NestedTensor
latents) and a tiny core model (Wan 2.1 / Flux) with two samplers fed by one SeaCache Apply, SeaCache settings,
samplers, batch sizes, sizes, interrupts (/interrupt) and cancels (deleted from the queue).

After every prompt it samples the server's RSS, its count of live torch tensors and of live objects of the pack's
classes through the probe (``seacache_testing/server_probe``, a custom node linked into the temp dir, not one of the
pack's nodes). It prints the curve, the RSS slope per 100 prompts after warm-up, and checks: every prompt ends in
success, interrupted or cancelled; after warm-up the RSS and tensor count stay flat within the stated bounds; no
SeaCache run object (``SamplingRun``, ``SeaCacheRun``, ``Call``) is alive between prompts; each SeaCache Stats node
shows the report of the sampler it follows (its step count). ``--without-seacache`` queues the same prompts with
SeaCache Apply and Stats bypassed (ComfyUI's own retention, the control); ``--trace-every N`` prints what the server
retained between probes after Cosmos3 prompts, the first after warm-up and then about every N prompts
(tracemalloc's growing allocation sites, newest frame first, and the object types whose counts grew).

  python -m benchmarks.soak --soak 200 --comfyui /path/to/ComfyUI   (the ComfyUI venv's python)
  python -m benchmarks.soak --soak 200 --without-seacache           (the control)
  python -m benchmarks.soak --soak 12                               (the integration suite's short version)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from seacache_testing.api_prompts import without_seacache
from seacache_testing.comfyui_server import ComfyServer, comfyui_version, outcome, retention, with_pack_and_probe

PACK_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = PACK_ROOT / "tests" / "fixtures" / "api_1_0_0" / "api"
SAMPLERS = ["euler", "uni_pc_bh2", "dpmpp_2m", "heun"]
GATES = ["sea same-sigma", "sea"]
RUN_CLASSES = ("SamplingRun", "SeaCacheRun", "Call")  # a run's objects: none may outlive its prompt


def prepare(base: Path):
    """Temp layout (``comfyui_server.with_pack_and_probe``) plus the tiny Cosmos3 checkpoints."""
    from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

    models = with_pack_and_probe(base)
    make_tiny_checkpoint(str(models / "tiny-cosmos3"))
    make_tiny_checkpoint(str(models / "tiny-cosmos3-sound"), "tiny-sound")


def fixture_prompt(comfy_version: str, name: str) -> dict:
    folder = FIXTURES / ("0.33.0" if tuple(map(int, comfy_version.split("."))) >= (0, 33, 0) else "0.3.64")
    return json.loads((folder / name).read_text())


def set_inputs(prompt: dict, class_type: str, **values):
    for entry in prompt.values():
        if entry["class_type"] == class_type:
            entry["inputs"].update({k: v for k, v in values.items() if k in entry["inputs"]})


def seacache_settings(rng) -> dict:
    gate = rng.choice(GATES)
    return {"threshold": rng.choice([0.0, 0.13, 0.3]) if gate != "sea" else 0.25, "gate": gate,
            "max_consecutive": rng.choice([1, 2, -1]), "residual_storage": rng.choice(["compute device", "cpu"])}


def cosmos3_prompt(rng, version: str, sound: bool):
    """The 1.0.0 T2V (with sound) example at a tiny size; expected steps per Stats node id."""
    prompt = fixture_prompt(version, "cosmos3_t2v_sound_seacache.json" if sound else "cosmos3_t2v_seacache.json")
    steps, size = rng.randint(3, 6), rng.choice([32, 64])
    set_inputs(prompt, "SeaCacheCosmos3Loader", checkpoint="tiny-cosmos3-sound" if sound else "tiny-cosmos3", weight_dtype="default")
    for node in ("SeaCacheCosmos3EmptyLatentVideo", "SeaCacheCosmos3EmptyAVLatent"):
        set_inputs(prompt, node, width=size, height=size, length=rng.choice([5, 9]),
                   batch_size=rng.choice([1, 2]))
    set_inputs(prompt, "SeaCacheCosmos3Scheduler", steps=steps)
    set_inputs(prompt, "KSamplerSelect", sampler_name=rng.choice(SAMPLERS))
    set_inputs(prompt, "RandomNoise", noise_seed=rng.randint(0, 2**31))
    set_inputs(prompt, "SeaCacheApply", **seacache_settings(rng))
    set_inputs(prompt, "SaveVideo", filename_prefix="video/soak")
    stats = [k for k, e in prompt.items() if e["class_type"] == "SeaCacheStats"]
    return prompt, {k: steps for k in stats}


def core_prompt(rng):
    """A tiny core model with two KSamplers (different steps) fed by one SeaCache Apply, a Stats node after each
    and its latent saved; expected steps per Stats node id."""
    name = rng.choice(["wan21_t2v", "flux"])
    batch, size = rng.choice([1, 2]), rng.choice([64, 128])
    latent = ({"class_type": "EmptyHunyuanLatentVideo", "inputs": {"width": size, "height": size, "length": 5, "batch_size": batch}}
              if name == "wan21_t2v" else {"class_type": "EmptySD3LatentImage", "inputs": {"width": size, "height": size, "batch_size": batch}})
    steps = rng.sample(range(3, 9), 2)
    prompt = {"1": {"class_type": "SoakTinyModel", "inputs": {"name": name, "seed": rng.randint(0, 100)}},
              "2": {"class_type": "SeaCacheApply", "inputs": {"model": ["1", 0], **{
                  "threshold": 0.13, "residual_order": "auto", "max_consecutive": 2, "warmup_steps": 1, "end_steps": 1,
                  "start_percent": 0.0, "end_percent": 1.0, "filter_exponent": "auto", "residual_storage": "compute device"},
                  **seacache_settings(rng)}},
              "3": latent}
    expected = {}
    for i, n in enumerate(steps):
        sampler, stats = str(10 + 10 * i), str(19 + 10 * i)
        prompt[sampler] = {"class_type": "KSampler", "inputs": {
            "model": ["2", 0], "seed": rng.randint(0, 2**31), "steps": n, "cfg": rng.choice([1.0, 3.0]),
            "sampler_name": rng.choice(SAMPLERS), "scheduler": rng.choice(["simple", "normal"]), "positive": ["1", 1],
            "negative": ["1", 2], "latent_image": ["3", 0], "denoise": 1.0}}
        samples = [sampler, 0]
        for j in range(1 + 2 * i):  # latent nodes between sampler and Stats: one for the first, three for the second
            node = str(11 + 10 * i + j)
            prompt[node] = {"class_type": "LatentMultiply", "inputs": {"samples": samples, "multiplier": 1.0}}
            samples = [node, 0]
        prompt[stats] = {"class_type": "SeaCacheStats", "inputs": {"samples": samples, "model": ["2", 0]}}
        prompt[str(int(stats) + 100)] = {"class_type": "SaveLatent",  # an output that stays without SeaCache (control)
                                       "inputs": {"samples": [stats, 0], "filename_prefix": "latents/soak"}}
        expected[stats] = n
    return prompt, expected


def retuned(prompt: dict, expected: dict, rng):
    """The core prompt again with the first sampler's steps and the latent node after the second sampler changed:
    ComfyUI reruns the first sampler and both Stats nodes but takes the second sampler from its cache, and (as it
    hurries nodes at most two links before an output) runs the first sampler before the second Stats node, which
    must still show its cached sampler's run, not the only run of this prompt."""
    prompt = json.loads(json.dumps(prompt))
    steps = rng.choice([n for n in range(3, 9) if n != expected["19"]])
    prompt["10"]["inputs"]["steps"] = steps
    prompt["21"]["inputs"]["multiplier"] = round(rng.uniform(0.9, 0.99), 3)
    return prompt, {**expected, "19": steps}


def one_prompt(srv: ComfyServer, args, rng, i: int, version: str, kinds: list, previous):
    """Queue prompt ``i`` (run, interrupted or cancelled); ``(kind, action, prompt, expected, entry)``."""
    if previous and previous[0] == "core" and previous[3] == "success" and rng.random() < 0.5:
        kind, (prompt, expected) = "retune", retuned(previous[1], previous[2], rng)
    else:
        kind = kinds[i % len(kinds)]
        prompt, expected = core_prompt(rng) if kind == "core" else cosmos3_prompt(rng, version, kind == "sound")
    action = rng.choices(["run", "interrupt", "cancel"], [0.8, 0.1, 0.1])[0] if i >= 2 and kind != "retune" else "run"
    sent = without_seacache(prompt, srv.object_info) if args.without_seacache else prompt
    if action == "cancel":  # queue a blocker, then the prompt, and delete the prompt while it waits
        blocker = core_prompt(rng)[0]
        blocker_id = srv.queue(without_seacache(blocker, srv.object_info) if args.without_seacache else blocker, "soak")
    prompt_id = srv.queue(sent, "soak")
    if action == "cancel":
        srv.call("/queue", {"delete": [prompt_id]})
        srv.wait_done(blocker_id, args.prompt_timeout)
    if action == "interrupt":
        time.sleep(rng.uniform(0.2, 1.5))
        srv.call("/interrupt", {})
    return kind, action, prompt, expected, srv.wait_done(prompt_id, args.prompt_timeout)


def run(args) -> dict:
    comfyui = Path(args.comfyui).resolve()
    sound = (comfyui / "comfy" / "nested_tensor.py").is_file()
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="seacache_soak_"))
    started = time.time()
    srv = None
    try:
        prepare(base)
        srv = ComfyServer(comfyui, args.python, base, env={"OMP_NUM_THREADS": "1"})
        srv.wait_ready("/seacache_probe/retention", args.startup_timeout)
        srv.object_info = srv.call("/object_info", timeout=120)
        version = comfyui_version(comfyui)
        kinds = ["cosmos3", "core"] + (["sound"] if sound else [])
        samples, outcomes, wrong_reports, checked, previous, traces = [], {}, [], 0, None, []
        for i in range(args.soak):
            if time.time() - started > args.max_seconds:
                print(f"time bound {args.max_seconds}s reached after {i} prompts")
                break
            kind, action, prompt, expected, entry = one_prompt(srv, args, rng, i, version, kinds, previous)
            result = outcome(entry)
            previous = (kind, prompt, expected, result)
            outcomes[result] = outcomes.get(result, 0) + 1
            if result == "success" and not args.without_seacache:  # the control has no Stats node to check
                for stats, steps in expected.items():
                    report = entry["outputs"][stats]["seacache"][0]
                    checked += 1
                    if report.get("steps") != steps or report.get("status") != "completed":
                        wrong_reports.append((i, stats, steps, report.get("steps")))
            elif result == "error":
                messages = [m for m in entry["status"]["messages"] if m[0] == "execution_error"]
                print(f"prompt {i} ({kind}) failed: {json.dumps(messages)[:2000]}")
            group = ("core" if kind == "retune" else kind) if result == "success" and action != "cancel" else None
            traced = args.trace_every and i + 1 >= args.warmup and group == "cosmos3"  # compared after one kind
            probe = retention(srv, trace=bool(traced) and len(traces) < 1 + (i + 1 - args.warmup) // args.trace_every)
            if "trace" in probe:
                traces.append((i + 1, probe["trace"]))
            runs_alive = sum(probe["pack_objects"].get(name, 0) for name in RUN_CLASSES)
            samples.append((i + 1, probe["rss"], probe["tensors"], group, runs_alive))  # group: what it last finished
            print(f"prompt {i + 1:4d} {kind:8s} {action:9s} {result:11s} rss {probe['rss'] / 2**20:8.1f} MiB  "
                  f"tensors {probe['tensors']:6d}  pack objects {sum(probe['pack_objects'].values()):5d}  "
                  f"t {time.time() - started:6.0f}s", flush=True)
        print_traces(traces)
        print_history(srv)
        return summarize(args, samples, outcomes, wrong_reports, checked, version)
    finally:
        if srv is not None:
            srv.stop()
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def print_history(srv) -> None:
    """What ComfyUI's prompt history holds at the end (it keeps up to 10000 prompts with their UI outputs), and the
    share of SeaCache Stats' reports in it, as JSON."""
    history = srv.call("/history", timeout=300)
    reports = sum(len(json.dumps(out["seacache"])) for entry in history.values()
                  for out in entry.get("outputs", {}).values() if "seacache" in out)
    print(f"ComfyUI's history: {len(history)} prompts, {len(json.dumps(history)) / 2**20:.2f} MiB as JSON, of which "
          f"SeaCache Stats reports {reports / 2**20:.2f} MiB")


def print_traces(traces: list) -> None:
    """What the server retained between traced probes (``--trace-every``): traced Python memory, the allocation
    sites that grew most and the object types whose counts grew."""
    for n, trace in traces:
        print(f"\n-- after prompt {n}: traced Python memory {trace['traced'] / 2**20:.1f} MiB")
        for site in trace["sites"]:
            print(f"  {site['size_diff'] / 1024:+9.1f} KiB {site['count_diff']:+7d} blocks  " + " <- ".join(site["frames"][:6]))
        print("  object types grown: " + ", ".join(f"{t} {d:+d}" for t, d in trace["types"]))


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def summarize(args, samples, outcomes, wrong_reports, checked, version) -> dict:
    """Print the curve and the checks; returns them (``ok`` says whether every check held)."""
    print(f"\nComfyUI {version}: {len(samples)} prompts, outcomes {outcomes}; {checked} Stats reports checked, "
          f"{len(wrong_reports)} wrong {wrong_reports[:5]}")
    marks = sorted({m for m in (10, 20, 50, 100, 150, 200, len(samples)) if m <= len(samples)})
    print("prompt  RSS MiB  live tensors")
    for n, rss, tensors, *_ in samples:
        if n in marks:
            print(f"{n:6d} {rss / 2**20:8.1f} {tensors:13d}")
    warm = min(args.warmup, max(len(samples) - 2, 0))
    after = samples[warm:]
    half = max(len(after) // 2, 1)
    first, last = after[:half], after[half:] or after[-1:]
    rss_growth = (median([s[1] for s in last]) - median([s[1] for s in first])) / 2**20
    slope = rss_slope(after)
    # Live tensors depend on what the server last ran (its cached outputs): compare after completed prompts of one
    # kind, first half against second half; the worst kind counts.
    margins = []  # (growth - bound, growth, bound, kind)
    for group in sorted({s[3] for s in after if s[3]}):
        before, later = [s[2] for s in first if s[3] == group], [s[2] for s in last if s[3] == group]
        if before and later:
            growth, bound = median(later) - median(before), max(args.tensor_bound_fraction * median(before), 50.0)
            margins.append((growth - bound, growth, bound, group))
            print(f"live tensors after {group} prompts: median {median(before)} then {median(later)}")
    _, tensor_growth, tensor_bound, worst = max(margins) if margins else (0, 0, 50.0, "no kind in both halves")
    print(f"after warm-up ({warm} prompts): median RSS of the second half minus the first {rss_growth:+.1f} MiB "
          f"(bound {args.rss_bound_mib} MiB); live tensors after completed prompts of one kind, worst ({worst}) "
          f"{tensor_growth:+d} (bound {tensor_bound:.0f})")
    runs_alive = max(s[4] for s in samples) if samples else 0
    print(f"RSS after warm-up {after[0][1] / 2**20:.1f} MiB -> end {after[-1][1] / 2**20:.1f} MiB, least-squares slope "
          f"{slope:+.1f} MiB per 100 prompts; SeaCache run objects alive between prompts: at most {runs_alive}")
    ok = (set(outcomes) <= {"success", "interrupted", "cancelled"} and not wrong_reports and runs_alive == 0
          and rss_growth <= args.rss_bound_mib and tensor_growth <= tensor_bound and outcomes.get("success", 0) > 0)
    print("soak", "PASSED" if ok else "FAILED")
    return dict(ok=ok, outcomes=outcomes, wrong_reports=wrong_reports, checked=checked, samples=samples,
                rss_growth_mib=rss_growth, rss_slope_mib_per_100=slope, tensor_growth=tensor_growth,
                runs_alive=runs_alive)


def rss_slope(samples) -> float:
    """Least-squares RSS slope in MiB per 100 prompts (0 under two samples): a trend, where the halves' medians
    move with one step of the allocator."""
    if len(samples) < 2:
        return 0.0
    mean_n, mean_rss = (sum(s[k] for s in samples) / len(samples) for k in (0, 1))
    covariance = sum((s[0] - mean_n) * (s[1] - mean_rss) for s in samples)
    return 100 * covariance / sum((s[0] - mean_n) ** 2 for s in samples) / 2**20


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--soak", type=int, default=200, help="prompts to queue")
    p.add_argument("--comfyui", default=os.environ.get("COMFYUI_PATH"), help="ComfyUI checkout (default $COMFYUI_PATH)")
    p.add_argument("--python", default=sys.executable, help="python with ComfyUI's requirements (default: this one)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--warmup", type=int, default=20, help="prompts before the flatness window")
    p.add_argument("--rss-bound-mib", type=float, default=150.0, help="allowed RSS growth after warm-up")
    p.add_argument("--tensor-bound-fraction", type=float, default=0.1, help="allowed live-tensor growth after warm-up")
    p.add_argument("--max-seconds", type=float, default=3600.0, help="stop queueing after this long")
    p.add_argument("--prompt-timeout", type=float, default=300.0)
    p.add_argument("--startup-timeout", type=float, default=180.0)
    p.add_argument("--keep", action="store_true", help="keep the temp base directory (server.log)")
    p.add_argument("--without-seacache", action="store_true",
                   help="control: the same prompts with SeaCache Apply and Stats bypassed (ComfyUI's own retention)")
    p.add_argument("--trace-every", type=int, default=0,
                   help="trace what the server retains (tracemalloc, object counts) after Cosmos3 prompts from the end "
                        "of warm-up, about every N prompts")
    return p


if __name__ == "__main__":
    arguments = parser().parse_args()
    if not arguments.comfyui:
        sys.exit("give --comfyui or set COMFYUI_PATH")
    sys.exit(0 if run(arguments)["ok"] else 1)
