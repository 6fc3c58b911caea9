"""A real ComfyUI server for tests and benchmarks: ``main.py --cpu`` on a free loopback port with a temp base
directory (custom_nodes with this pack linked in, models, io), driven over HTTP the way the frontend drives it.

A probe custom node (written into the temp custom_nodes, not part of the pack) adds ``GET /seacache_probe``: the
server's RSS, its live torch tensors, the live objects of classes the pack defines (by class name: ``SamplingRun``,
``Call``, ``SeaCacheSettings``...), and the live MODELs that carry SeaCache (its settings or its keyed wrappers).
``GET /seacache_probe?trace=1`` also returns the allocation sites whose traced memory grew most since the previous
traced probe (tracemalloc, started by the first one) and the object types whose counts grew: what a prompt retains.
It also registers ``SoakTinyModel`` (tiny core models: Wan 2.1 / Flux with their conditioning). The frontend's
edits of an API prompt (bypass, delete) are in :mod:`.api_prompts`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

PACK_ROOT = Path(__file__).resolve().parents[1]
PACK_FOLDER = "ComfyUI-SeaCache"
PROBE = '''"""Test-only probe (written by seacache_testing/comfy_server.py): memory, live tensors, what the pack keeps."""
import gc, os, sys, tracemalloc
from collections import Counter
import torch
from aiohttp import web
import comfy.model_patcher
import server
sys.path.insert(0, {root!r})  # entry-point shim: ComfyUI loads this node by path; seacache_testing from the pack
from seacache_testing import tiny_comfy_models

PACK = os.path.realpath({root!r}) + os.sep
SETTINGS, WRAPPER_KEY = "seacache_settings", "seacache"
previous = {{}}


def pack_class(cls, known={{}}):
    """Whether the pack's code defines ``cls`` (per class, once: the answer is cached)."""
    if cls not in known:
        module = sys.modules.get(getattr(cls, "__module__", None) or "")
        known[cls] = os.path.realpath(getattr(module, "__file__", None) or "/").startswith(PACK)
    return known[cls]


def carries_seacache(obj):
    """A MODEL (ModelPatcher) with SeaCache's settings or keyed wrappers on it."""
    if not isinstance(obj, comfy.model_patcher.ModelPatcher):
        return False
    options = obj.model_options.get("transformer_options", {{}})
    wrappers = list(options.get("wrappers", {{}}).values()) + list(obj.wrappers.values())
    return SETTINGS in options or any(WRAPPER_KEY in by_key for by_key in wrappers)


@server.PromptServer.instance.routes.get("/seacache_probe")
async def probe(request):
    gc.collect()
    objects = gc.get_objects()
    out = {{"tensors": sum(1 for o in objects if isinstance(o, torch.Tensor)),
           "pack_objects": dict(Counter(type(o).__name__ for o in objects if pack_class(type(o)))),
           "seacache_models": sum(1 for o in objects if carries_seacache(o))}}
    types = Counter(type(o).__qualname__ for o in objects) if request.query.get("trace") else None
    del objects
    with open(f"/proc/{{os.getpid()}}/statm") as f:
        out["rss"] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    if types is not None:
        out["trace"] = trace(types)
    return web.json_response(out)


def trace(types):
    """Allocation sites (this probe's own left out) and object types grown since the previous traced probe; the
    first one starts tracing."""
    if not tracemalloc.is_tracing():
        tracemalloc.start(12)
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__),
                                                          tracemalloc.Filter(False, __file__, all_frames=True)])
    sites, grown = [], []
    if previous:
        for stat in snapshot.compare_to(previous["snapshot"], "traceback")[:12]:
            frames = [f"{{f.filename}}:{{f.lineno}}" for f in reversed(stat.traceback)]  # the allocation first
            sites.append({{"size_diff": stat.size_diff, "count_diff": stat.count_diff, "frames": frames}})
        grown = sorted(((n - previous["types"].get(t, 0), t) for t, n in types.items()), reverse=True)[:15]
    previous.update(snapshot=snapshot, types=types)
    return {{"traced": tracemalloc.get_traced_memory()[0], "sites": sites, "types": [[t, d] for d, t in grown if d > 0]}}


class SoakTinyModel:
    @classmethod
    def INPUT_TYPES(cls):
        return {{"required": {{"name": (["wan21_t2v", "flux"],), "seed": ("INT", {{"default": 0}})}}}}
    RETURN_TYPES = ("MODEL", "CONDITIONING", "CONDITIONING")
    FUNCTION = "build"
    CATEGORY = "soak"

    def build(self, name, seed):
        spec = tiny_comfy_models.SPECS[name]
        return (tiny_comfy_models.build(name), tiny_comfy_models.conditioning(spec, seed), tiny_comfy_models.conditioning(spec, seed + 1))


NODE_CLASS_MAPPINGS = {{"SoakTinyModel": SoakTinyModel}}
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare_base(base: Path, with_pack: bool = True) -> Path:
    """The temp base directory: custom_nodes/ (this pack as a symlink unless ``with_pack`` is False, the probe) and
    an empty models/diffusion_models; returns that models folder."""
    nodes = base / "custom_nodes"
    nodes.mkdir(parents=True)
    if with_pack:
        (nodes / PACK_FOLDER).symlink_to(PACK_ROOT, target_is_directory=True)
    (nodes / "seacache_probe").mkdir()
    (nodes / "seacache_probe" / "__init__.py").write_text(PROBE.format(root=str(PACK_ROOT)))
    models = base / "models" / "diffusion_models"
    models.mkdir(parents=True)
    return models


class ComfyServer:
    """ComfyUI's main.py --cpu on a loopback port with ``base`` as its base directory (prepared by
    :func:`prepare_base`); the server's log is ``base/server.log``."""

    def __init__(self, comfyui: Path, python: str, base: Path):
        self.comfyui, self.port, self.base = Path(comfyui), free_port(), Path(base)
        self.log_path = self.base / "server.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [python, str(self.comfyui / "main.py"), "--cpu", "--listen", "127.0.0.1", "--port", str(self.port),
             "--base-directory", str(self.base), "--disable-auto-launch", "--preview-method", "none"],
            cwd=str(self.comfyui), stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"})

    @property
    def version(self) -> str:
        return (self.comfyui / "comfyui_version.py").read_text().split('"')[1]

    def call(self, path: str, data=None, timeout=60):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method="GET" if data is None else "POST",
                                     data=None if data is None else json.dumps(data).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            body = r.read()
        return json.loads(body) if body else None

    def probe(self, trace: bool = False) -> dict:
        return self.call("/seacache_probe" + ("?trace=1" if trace else ""), timeout=300)

    def wait_ready(self, timeout: float) -> dict:
        end = time.time() + timeout
        while time.time() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ComfyUI exited ({self.proc.returncode}); see {self.log_path}")
            try:
                return self.probe()
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(1)
        raise TimeoutError("ComfyUI did not come up")

    def queue(self, prompt: dict, client_id: str = "seacache-test") -> str:
        """Queue an API prompt; its id. A prompt ComfyUI refuses raises with the server's node errors."""
        try:
            return self.call("/prompt", {"prompt": prompt, "client_id": client_id})["prompt_id"]
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"ComfyUI refused the prompt: {error.read().decode()[:3000]}") from None

    def wait_done(self, prompt_id: str, timeout: float):
        """The prompt's history entry once it ended; None when it was deleted from the queue before it ran."""
        end = time.time() + timeout
        while time.time() < end:
            history = self.call(f"/history/{prompt_id}")
            if prompt_id in history:
                return history[prompt_id]
            queue = self.call("/queue")
            if not any(item[1] == prompt_id for item in queue["queue_running"] + queue["queue_pending"]):
                time.sleep(0.3)
                return self.call(f"/history/{prompt_id}").get(prompt_id)
            time.sleep(0.2)
        raise TimeoutError(f"prompt {prompt_id} did not finish in {timeout}s")

    def run(self, prompt: dict, timeout: float = 300.0) -> dict:
        """Queue ``prompt`` and wait for its history entry."""
        return self.wait_done(self.queue(prompt), timeout)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
        self.log.close()


def outcome(entry) -> str:
    """success, interrupted, cancelled (never ran) or error, from a history entry."""
    if entry is None:
        return "cancelled"
    status = entry.get("status", {})
    events = [m[0] for m in status.get("messages", [])]
    if "execution_interrupted" in events:
        return "interrupted"
    return "success" if status.get("status_str") == "success" and status.get("completed") else "error"


def cached_nodes(entry) -> set[str]:
    """The node ids ComfyUI took from its cache instead of running, in a history entry."""
    return {node for event, data in entry["status"]["messages"] if event == "execution_cached" for node in data["nodes"]}
