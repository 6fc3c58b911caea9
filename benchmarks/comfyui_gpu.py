"""SeaCache through ComfyUI the way a user runs it: ComfyUI's own server (``main.py``) on a loopback port, the T2V
example workflow converted and queued as the frontend queues it, at Cosmos3-Nano's size on an NVIDIA GPU.

    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.comfyui_gpu [--budget-s 480] [--only 1,2,3]   # a GPU
    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.comfyui_gpu --smoke                           # the CPU

The checkpoint is written on the machine: random weights at Nano's dimensions (sharded bf16 safetensors, drawn on
the GPU) with a full-size random Wan2.2 VAE, so that loading, sampling, decoding and memory cost what they cost
(the gate's decisions are not a trained model's). Each server is a fresh ``main.py``; the servers and their runs
come in the order users need them, and a run the budget cannot fit is listed as skipped:

1. dynamic VRAM, started by ``main.py`` as on any NVIDIA card, on a 24 GB card: ``--reserve-vram`` total - 24 GB
   and a hard wall on torch's allocator. The shipped workflow (832x480x93, 35 steps, fp8_e4m3fn) uncached, at
   SeaCache's defaults and at ``speedup`` 3; then what the 720p recipe (1280x720x189) needs, 4 steps standing for a
   longer run (``min_steps`` 0, so they reuse): fp8 with the decode, bf16, fp8 with the residual history on the CPU.
2. dynamic VRAM disabled (``--disable-dynamic-vram``), the same card: the shipped workflow uncached and cached.
3. dynamic VRAM on the whole GPU: bf16 uncached and cached; fp8_e4m3fn_fast; residuals on the CPU; TorchCompileModel.

Per run, one row printed as it ends: sampling s (the sampler node), decode s (VAE Decode), end to end s (the whole
prompt, loading included), steps 2-N s (between the sampler's first and last progress events, so the weight load of
a server's first run is left out), the measured speedup (steps 2-N of the run it names as its baseline over its
own) beside the ideal (calls over calls that ran the stack), peak memory (torch's ``max_memory_allocated`` and the
device's used memory, sampled by a probe in the server) and SeaCache Stats' first summary line. ``--smoke`` runs the
same servers and rows on the CPU at tiny sizes (dynamic VRAM emulated where the ComfyUI has it), all but the
compiled run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from seacache_testing.comfyui_server import (ComfyServer, EventLog, error_message, link_custom_node, node_seconds,
                                             outcome, progress_times, to_api_prompt)

PACK_ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = PACK_ROOT / "example_workflows" / "cosmos3_t2v_seacache.json"
PROBE = PACK_ROOT / "seacache_testing" / "server_probe"
CHECKPOINT = "cosmos3-random"
CAP_GIB = 24.0
GIB = 2**30
# Node ids of the T2V example workflow that the runs rewire.
LOADER, APPLY, GUIDER, LATENT, SCHEDULER, SAMPLER, STATS, DECODE, VIDEO, SAVE, CHART, SUMMARY = (
    "1", "2", "6", "5", "9", "10", "11", "12", "13", "14", "15", "17")
COMPILE = "90"
SKIPPED, STOPPED, SERVER_FAILED = "skipped: the budget is spent", "stopped by the budget", "the server failed"


@dataclass(frozen=True)
class Run:
    """One prompt: the example workflow with these weights, size and steps; ``seacache`` None removes SeaCache
    Apply and Stats (the uncached graph), else SeaCache Apply's inputs changed from the workflow's; ``baseline``
    names the run whose steps 2-N its measured speedup divides."""

    name: str
    weight_dtype: str
    size: tuple[int, int, int]
    steps: int
    seacache: dict | None = field(default_factory=dict)
    baseline: str | None = None
    decode: bool = True
    compile: bool = False


@dataclass(frozen=True)
class Server:
    """One ``main.py``: dynamic VRAM on or off, an emulated card of ``cap_gib`` GiB or the whole device."""

    name: str
    dynamic_vram: bool
    cap_gib: float | None
    runs: tuple[Run, ...]


SD, HD = (832, 480, 93), (1280, 720, 189)
PLAN = (
    Server("1", True, CAP_GIB, (
        Run("uncached fp8", "fp8_e4m3fn", SD, 35, None),
        Run("defaults fp8", "fp8_e4m3fn", SD, 35, baseline="uncached fp8"),
        Run("speedup 3 fp8", "fp8_e4m3fn", SD, 35, {"speedup": 3.0}, baseline="uncached fp8"),
        Run("720p fp8", "fp8_e4m3fn", HD, 4, {"min_steps": 0}),
        Run("720p bf16", "default", HD, 4, {"min_steps": 0}, decode=False),
        Run("720p fp8 residuals cpu", "fp8_e4m3fn", HD, 4, {"residual_storage": "cpu", "min_steps": 0}, decode=False),
    )),
    Server("2", False, CAP_GIB, (
        Run("uncached fp8", "fp8_e4m3fn", SD, 35, None),
        Run("defaults fp8", "fp8_e4m3fn", SD, 35, baseline="uncached fp8"),
    )),
    Server("3", True, None, (
        Run("uncached bf16", "default", SD, 35, None),
        Run("defaults bf16", "default", SD, 35, baseline="uncached bf16"),
        Run("defaults fp8_fast", "fp8_e4m3fn_fast", SD, 35, baseline="uncached bf16"),
        Run("defaults bf16 residuals cpu", "default", SD, 35, {"residual_storage": "cpu"}, baseline="uncached bf16"),
        Run("defaults bf16 compiled", "default", SD, 35, baseline="uncached bf16", compile=True),
    )),
)
SMOKE_SIZES = {SD: (64, 64, 9), HD: (96, 64, 9)}
SMOKE_STEPS = 6


def smoke_plan() -> tuple[Server, ...]:
    """The same servers and runs at tiny sizes and 6 steps (4 stay 4) with ``min_steps`` 0 (they reuse as at 35), but
    the compiled one: inductor takes minutes on a CPU (compile with SeaCache is tested in tests/test_comfy_compile.py)."""
    return tuple(replace(server, runs=tuple(replace(run, size=SMOKE_SIZES[run.size], steps=min(run.steps, SMOKE_STEPS),
                                                    seacache=None if run.seacache is None else {**run.seacache, "min_steps": 0})
                                            for run in server.runs if not run.compile)) for server in PLAN)


def api_prompt(server: ComfyServer, run: Run) -> dict:
    """The example workflow as the frontend queues it, changed for ``run``: checkpoint, weights, size, steps and
    SeaCache's inputs; the video is previewed instead of encoded (encoding is not SeaCache's, and a GPU machine
    may lack PyAV); without SeaCache its two nodes are deleted and their consumers rewired, as a user deletes them."""
    width, height, length = run.size
    prompt = to_api_prompt(server, json.loads(WORKFLOW.read_text()), {
        ("SeaCacheCosmos3Loader", "checkpoint"): CHECKPOINT, ("SeaCacheCosmos3Loader", "weight_dtype"): run.weight_dtype,
        ("SeaCacheCosmos3EmptyLatentVideo", "width"): width, ("SeaCacheCosmos3EmptyLatentVideo", "height"): height,
        ("SeaCacheCosmos3EmptyLatentVideo", "length"): length, ("SeaCacheCosmos3Scheduler", "steps"): run.steps})
    prompt[SAVE] = {"class_type": "PreviewAny", "inputs": {"source": [VIDEO, 0]}}
    if not run.decode:
        for node in (DECODE, VIDEO, SAVE):
            del prompt[node]
    model = [LOADER, 0]
    if run.compile:
        prompt[COMPILE] = {"class_type": "TorchCompileModel", "inputs": {"model": model, "backend": "inductor"}}
        model = [COMPILE, 0]
    if run.seacache is None:
        for node in (APPLY, STATS, CHART, SUMMARY):
            del prompt[node]
        prompt[GUIDER]["inputs"]["model"] = model
        if run.decode:
            prompt[DECODE]["inputs"]["samples"] = [SAMPLER, 0]
        else:
            prompt[SUMMARY] = {"class_type": "PreviewAny", "inputs": {"source": [SAMPLER, 0]}}  # an output to run
    else:
        prompt[APPLY]["inputs"].update(run.seacache, model=model)
    return prompt


def gib(value) -> str:
    return "-" if value is None else f"{value / GIB:.2f}"


def measure(server: ComfyServer, events: EventLog, run: Run, timeout: float) -> dict:
    """Queue ``run`` and wait for it: its row's figures, or why it did not finish."""
    server.call("/seacache_probe/memory", {})
    prompt_id = server.queue(api_prompt(server, run), events.client_id)  # its events come to this client
    started = time.perf_counter()
    try:
        entry = server.wait_done(prompt_id, timeout)
    except TimeoutError:
        server.call("/interrupt", {})
        server.wait_done(prompt_id, 120)
        return {"result": STOPPED}
    end_to_end = time.perf_counter() - started
    result = outcome(entry)
    if result != "success":
        return {"result": f"{result}: {error_message(entry)}"}
    mine = events.of_prompt(prompt_id)
    seconds, steps = node_seconds(mine), progress_times(mine, SAMPLER)
    report = (entry.get("outputs", {}).get(STATS, {}).get("seacache") or [None])[0]
    return {"result": "ok", "sampling": seconds.get(SAMPLER), "decode": seconds.get(DECODE), "e2e": end_to_end,
            "steps_2_n": steps[-1] - steps[0] if len(steps) > 1 else None, "report": report,
            **server.call("/seacache_probe/memory")}


HEADER = ("| server | run | dynamic VRAM | card | weights | size | steps | sampling s | decode s | end to end s "
          "| steps 2-N s | speedup measured / ideal | torch peak GiB | device peak GiB | SeaCache |")


def row(server: Server, run: Run, figures: dict, baseline: dict | None) -> str:
    card = "whole device" if server.cap_gib is None else f"{server.cap_gib:g} GB"
    size = "x".join(map(str, run.size)) + (" +compile" if run.compile else "") + ("" if run.decode else " (no decode)")
    dynamic = {True: "on", False: "off"}.get(figures.get("dynamic_vram"), "-")
    start = f"| {server.name} | {run.name} | {dynamic} | {card} | {run.weight_dtype} | {size} | {run.steps} |"
    if figures["result"] != "ok":
        return f"{start} {figures['result']} |"
    report = figures["report"]
    ideal = report["speedup"] if report and report.get("speedup") else 1.0
    measured = "-"
    if baseline and baseline.get("steps_2_n") and figures.get("steps_2_n"):
        ratio = baseline["steps_2_n"] / figures["steps_2_n"]
        # above the ideal is impossible for SeaCache: the two runs' steps did not run at one speed
        measured = f"{ratio:.2f}x" + (" (above ideal: timing noise)" if ratio > 1.03 * ideal else "")
    summary = (report or {}).get("summary", "uncached").splitlines()[0] if report else "uncached"
    fmt = lambda v: "-" if v is None else f"{v:.3g}"  # noqa: E731
    return (f"{start} {fmt(figures['sampling'])} | {fmt(figures['decode'])} | {fmt(figures['e2e'])} | "
            f"{fmt(figures['steps_2_n'])} | {measured} / {ideal:.2f}x | {gib(figures['torch_peak'])} | "
            f"{gib(figures['device_peak'])} | {summary} |")


def device_total(python: str) -> int | None:
    """The GPU's memory in bytes, read in a child process (this one never holds a CUDA context)."""
    code = "import torch; print(torch.cuda.mem_get_info()[1] if torch.cuda.is_available() else '')"
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return int(out) if out else None


def server_flags(comfyui: Path, server: Server, smoke: bool, total: int | None) -> tuple[list[str], dict, str]:
    """main.py's flags and the probe's environment for ``server``, and what happened to dynamic VRAM. On a GPU,
    main.py starts dynamic VRAM itself; on the CPU it is emulated where this ComfyUI has it."""
    has_dynamic = (comfyui / "comfy" / "memory_management.py").is_file()
    flags, env = (["--cpu"] if smoke else []), {}
    if server.cap_gib is not None and total is not None:
        flags += ["--reserve-vram", f"{max(total / GIB - server.cap_gib, 0):.2f}"]
        env["SEACACHE_PROBE_CAP_GIB"] = str(server.cap_gib)
    if not has_dynamic:
        return flags, env, "this ComfyUI has no dynamic VRAM"
    if not server.dynamic_vram:
        flags.append("--disable-dynamic-vram")
    elif smoke:
        env["SEACACHE_PROBE_EMULATE_DYNAMIC_VRAM"] = "1"
    return flags, env, ""


def run_server(comfyui: Path, python: str, base: Path, server: Server, smoke: bool, total, deadline: float) -> dict:
    """Start ``server``'s main.py, queue its runs, print each row as it ends; returns each run's figures by name."""
    flags, env, note = server_flags(comfyui, server, smoke, total)
    print(f"server {server.name}: main.py {' '.join(flags) or '(no flags)'}{f' ({note})' if note else ''}", flush=True)
    srv = ComfyServer(comfyui, python, base, flags, env)
    done: dict[str, dict] = {}
    try:
        info = srv.wait_ready("/seacache_probe/memory", max(deadline - time.time(), 1))
        print(f"  {info['device']}, torch {info['torch']}, dynamic VRAM {'on' if info['dynamic_vram'] else 'off'}",
              flush=True)
        events = EventLog(srv, uuid.uuid4().hex)
        try:
            for run in server.runs:
                left = deadline - time.time()
                done[run.name] = measure(srv, events, run, left) if left >= 20 else {"result": SKIPPED}
                print(row(server, run, done[run.name], done.get(run.baseline)), flush=True)
        finally:
            events.close()
    except (RuntimeError, TimeoutError) as exc:
        print(f"  server {server.name} failed: {exc}\n{srv.log_tail()}", flush=True)
        done = {**{run.name: {"result": SERVER_FAILED} for run in server.runs}, **done}
    finally:
        srv.stop()
    return done


def write_checkpoint(python: str, models: Path, smoke: bool) -> float:
    """The checkpoint folder under ``models``, written by a child process (on the GPU for Nano's size); seconds."""
    start = time.time()
    subprocess.run([python, "-m", "seacache_testing.make_tiny_checkpoint", str(models / CHECKPOINT),
                    "--preset", "tiny" if smoke else "nano", "--device", "cpu" if smoke else "cuda"],
                   cwd=PACK_ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.time() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="the CPU, tiny sizes: the same servers, runs and table")
    parser.add_argument("--budget-s", type=float, default=480.0, help="stop starting runs after this long")
    parser.add_argument("--only", default=None, help="comma-separated server names (1, 2, 3) to run")
    parser.add_argument("--comfyui", default=os.environ.get("COMFYUI_PATH"), help="ComfyUI folder ($COMFYUI_PATH)")
    parser.add_argument("--python", default=sys.executable, help="the python that runs ComfyUI")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (checkpoint, server logs)")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a time limit's SIGTERM still stops the server
    if not args.comfyui:
        sys.exit("give --comfyui or set COMFYUI_PATH")
    deadline = time.time() + args.budget_s
    comfyui = Path(args.comfyui).resolve()
    plan = smoke_plan() if args.smoke else PLAN
    if args.only:
        plan = tuple(s for s in plan if s.name in args.only.split(","))
    root = Path(tempfile.mkdtemp(prefix="seacache_comfyui_gpu_"))
    failed = False
    try:
        models = root / "models" / "diffusion_models"
        print(f"checkpoint {'tiny' if args.smoke else 'Nano-size'} written in {write_checkpoint(args.python, models, args.smoke):.0f} s",
              flush=True)
        total = None if args.smoke else device_total(args.python)
        print(HEADER + "\n|" + "---|" * (HEADER.count("|") - 1), flush=True)
        for server in plan:
            if deadline - time.time() < 60:
                print(f"| {server.name} | (all runs) | {SKIPPED} |", flush=True)
                continue
            base = root / f"server{server.name}"
            (base / "models").mkdir(parents=True)
            (base / "models" / "diffusion_models").symlink_to(models, target_is_directory=True)
            link_custom_node(base, PACK_ROOT, "ComfyUI-SeaCache")
            link_custom_node(base, PROBE, "seacache_probe")
            results = run_server(comfyui, args.python, base, server, args.smoke, total, deadline)
            failed |= any(f["result"] not in ("ok", SKIPPED, STOPPED) for f in results.values())
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
