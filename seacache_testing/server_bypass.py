"""The T2V example workflow on one running ComfyUI server in the forms a user leaves it in: with SeaCache Apply
active, bypassed (mode 4), deleted, and as a graph that never had SeaCache; what each queued prompt sampled and
what the server holds afterwards. Shared by tests/test_comfy_server_bypass.py and benchmarks/bypass_cost.py.

The workflow is converted to its API prompt from the server's ``/object_info`` (as the frontend does), sized to
the tiny Cosmos3 checkpoint (``workflow_cases.overrides``), and gets a ``SaveLatent`` node on the latent the decoder
reads, so the sampled latent can be compared bit for bit (the saved video's container carries the prompt).

ComfyUI's output cache would hand a prompt the sampler output of an earlier one with the same inputs; the
variants that must match are therefore queued with a prompt that samples something else in between, and
:func:`ran_sampler` says whether the sampler really ran.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from . import workflow_cases
from . import workflow_runner as wr
from .api_prompts import bypass_node, connect, delete_node, without_seacache
from .comfyui_server import ComfyServer, cached_nodes, outcome, retention, run_prompt, with_pack_and_probe
from .make_tiny_checkpoint import make_tiny_checkpoint

SAVE_LATENT = "9001"
VARIANTS = ("never", "active", "bypassed", "deleted")


def start_server(comfyui: Path, python: str, base: Path | None = None, timeout: float = 300.0) -> ComfyServer:
    """A ready server with the pack, the probe and the tiny Cosmos3 checkpoint the overrides name; its
    ``object_info`` read."""
    base = Path(base or tempfile.mkdtemp(prefix="seacache_bypass_"))
    models = with_pack_and_probe(base)
    make_tiny_checkpoint(str(models / workflow_cases.TINY_NAME))
    srv = ComfyServer(comfyui, python, base, env={"OMP_NUM_THREADS": "1"})
    try:
        srv.wait_ready("/seacache_probe/retention", timeout)
        srv.object_info = srv.call("/object_info", timeout=120)
    except BaseException:
        srv.stop()
        raise
    return srv


def log_text(srv: ComfyServer) -> str:
    return (srv.base / "server.log").read_text(errors="replace")


def run(srv: ComfyServer, prompt: dict) -> dict:
    """The history entry of ``prompt``, which must succeed."""
    entry = run_prompt(srv, prompt, timeout=1800)
    if outcome(entry) != "success":
        raise AssertionError(f"the prompt did not succeed: {entry['status'] if entry else 'cancelled'}")
    return entry


def t2v_variants(object_info: dict, seed: int = 0, steps: int = workflow_cases.STEPS, threshold: float = 0.8) -> dict:
    """The four API prompts of the T2V example at tiny size: ``active`` (SeaCache Apply at ``threshold``, high
    enough that the tiny model reuses steps, and ``min_steps`` 0: the tiny run has 6), ``bypassed`` (Apply in mode 4), ``deleted`` (Apply deleted without
    "keep links": the user reconnects the guider to the loader, Stats' optional ``model`` stays unconnected) and
    ``never`` (Apply and Stats bypassed, their previews gone)."""
    overrides = workflow_cases.overrides({("SeaCacheApply", "threshold"): threshold, ("SeaCacheApply", "min_steps"): 0,
                                          ("RandomNoise", "noise_seed"): seed, ("SeaCacheCosmos3Scheduler", "steps"): steps})
    workflow = wr.load_workflow(wr.WORKFLOWS_DIR / workflow_cases.T2V)
    nodes = SimpleNamespace(node=lambda kind: SimpleNamespace(INPUT_TYPES=lambda: object_info[kind]["input"]))
    active = wr.to_api_prompt(nodes, workflow, overrides)
    (decode,) = [k for k, e in active.items() if e["class_type"] == "VAEDecode"]
    active[SAVE_LATENT] = {"class_type": "SaveLatent", "inputs": {"samples": active[decode]["inputs"]["samples"],
                                                                   "filename_prefix": "latents/seacache_bypass"}}
    (apply,) = [k for k, e in active.items() if e["class_type"] == "SeaCacheApply"]
    consumers = [(k, name) for k, e in active.items() for name, v in e["inputs"].items()
                 if v == [apply, 0] and e["class_type"] != "SeaCacheStats"]
    deleted = delete_node(active, apply, object_info, keep_links=False)
    for node, name in consumers:  # the user reconnects what needs a MODEL; Stats runs without one
        deleted = connect(deleted, node, name, active[apply]["inputs"]["model"])
    return {"active": active, "bypassed": bypass_node(active, apply, object_info), "deleted": deleted,
            "never": without_seacache(active, object_info)}


def sampler_id(prompt: dict) -> str:
    (sampler,) = [k for k, e in prompt.items() if e["class_type"] == "SamplerCustomAdvanced"]
    return sampler


def ran_sampler(prompt: dict, entry: dict) -> bool:
    """Whether the prompt's sampler ran (instead of coming from ComfyUI's cache)."""
    return sampler_id(prompt) not in cached_nodes(entry)


def saved_latent(srv: ComfyServer, entry: dict):
    """The latent SaveLatent wrote for a finished prompt (exact tensor)."""
    from safetensors.torch import load_file

    saved = entry["outputs"][SAVE_LATENT]["latents"][0]
    return load_file(str(srv.base / "output" / saved["subfolder"] / saved["filename"]))["latent_tensor"]


def wall_seconds(entry: dict) -> float:
    """Start to end of the prompt's execution, from the server's own timestamps (ms)."""
    stamps = {event: data.get("timestamp") for event, data in entry["status"]["messages"]}
    end = stamps.get("execution_success") or stamps.get("execution_interrupted") or stamps.get("execution_error")
    return (end - stamps["execution_start"]) / 1000.0


def interrupt_while_sampling(srv: ComfyServer, prompt: dict, timeout: float = 600.0) -> dict:
    """Queue ``prompt`` (SeaCache active), wait until the server holds a live sampling run, press Cancel
    (POST /interrupt) and return the prompt's history entry."""
    prompt_id = srv.queue(prompt, "seacache-test")
    end = time.time() + timeout
    while retention(srv)["pack_objects"].get("SamplingRun", 0) == 0:
        if time.time() > end:
            raise TimeoutError("the sampling run never started")
        time.sleep(0.05)
    srv.call("/interrupt", {})
    entry = srv.wait_done(prompt_id, timeout)
    if outcome(entry) != "interrupted":
        raise AssertionError(f"the run was not interrupted: {outcome(entry)}")
    return entry
