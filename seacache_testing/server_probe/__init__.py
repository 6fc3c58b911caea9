"""A probe that benchmarks load into a real ComfyUI server as a custom node (never part of the pack's nodes): the
server's memory as the benchmark reads it between prompts, and the settings a run asks for at server start.

Environment, read once when ComfyUI loads this folder (before any prompt):
- ``SEACACHE_PROBE_CAP_GIB``: on CUDA, a hard wall for torch's allocator at that many GiB
  (``torch.cuda.set_per_process_memory_fraction``), beside the ``--reserve-vram`` the server was started with.
- ``SEACACHE_PROBE_EMULATE_DYNAMIC_VRAM=1``: dynamic VRAM the way ``tests/test_comfy_dynamic_vram.py`` emulates
  it on the CPU, where ``main.py`` does not start it (on NVIDIA ``main.py`` itself starts it).

Routes: ``GET /seacache_probe/memory`` (peaks since the last reset: torch's ``max_memory_allocated``, the device's
used memory sampled every 10 ms from ``torch.cuda.mem_get_info``, its total, the process's RSS, whether dynamic
VRAM is on) and ``POST /seacache_probe/memory`` (reset the peaks). ``GET /seacache_probe/retention``: what the
server holds between prompts (after a garbage collection): its RSS, its live torch tensors, the live objects of
classes the pack defines (by class name: ``SamplingRun``, ``Call``, ``SeaCacheSettings``...) and the live MODELs
that carry SeaCache (its settings or its keyed wrappers); with ``?trace=1`` also the allocation sites whose traced
memory grew most since the previous traced call (tracemalloc, started by the first; the newest frame first) and
the object types whose counts grew. Node ``SoakTinyModel``: a tiny core model (Wan 2.1 / Flux) with its
conditioning, for the soak.
"""

import gc
import os
import sys
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import torch
from aiohttp import web

import comfy.model_management
import comfy.model_patcher
import server

PACK = str(Path(__file__).resolve().parents[2]) + os.sep
sys.path.append(PACK)  # entry-point shim: ComfyUI loads this folder by path; seacache_testing from the pack
from seacache_testing import tiny_comfy_models  # noqa: E402

SETTINGS_OPTION, WRAPPER_KEY = "seacache_settings", "seacache"
CUDA = torch.cuda.is_available() and comfy.model_management.get_torch_device().type == "cuda"


def _emulate_dynamic_vram():
    import comfy.memory_management
    import comfy_aimdo.control

    comfy_aimdo.control.init()
    comfy.memory_management.aimdo_enabled = True
    comfy.model_patcher.CoreModelPatcher = comfy.model_patcher.ModelPatcherDynamic


class DevicePeak:
    """The most device memory in use (total - free, every process) since the last reset, sampled every 10 ms."""

    def __init__(self):
        self.total = torch.cuda.mem_get_info()[1]
        self.peak = 0
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self):
        while True:
            free, _ = torch.cuda.mem_get_info()
            self.peak = max(self.peak, self.total - free)
            time.sleep(0.01)


if os.environ.get("SEACACHE_PROBE_EMULATE_DYNAMIC_VRAM") == "1":
    _emulate_dynamic_vram()
if CUDA and os.environ.get("SEACACHE_PROBE_CAP_GIB"):
    torch.cuda.set_per_process_memory_fraction(
        min(1.0, float(os.environ["SEACACHE_PROBE_CAP_GIB"]) * 2**30 / torch.cuda.mem_get_info()[1]))
DEVICE = DevicePeak() if CUDA else None


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _dynamic_vram() -> bool:
    try:
        import comfy.memory_management
    except ImportError:  # a ComfyUI before dynamic VRAM
        return False
    return bool(getattr(comfy.memory_management, "aimdo_enabled", False))


@server.PromptServer.instance.routes.get("/seacache_probe/memory")
async def memory(request):
    return web.json_response({
        "torch_peak": torch.cuda.max_memory_allocated() if CUDA else None,
        "device_peak": DEVICE.peak if DEVICE else None,
        "device_total": DEVICE.total if DEVICE else None,
        "rss": _rss(),
        "dynamic_vram": _dynamic_vram(),
        "device": torch.cuda.get_device_name() if CUDA else "cpu",
        "torch": torch.__version__,
    })


@server.PromptServer.instance.routes.post("/seacache_probe/memory")
async def reset(request):
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        DEVICE.peak = 0
    return web.json_response({})


def _pack_class(cls, known={}):
    """Whether the pack's code defines ``cls`` (per class, once: the answer is cached)."""
    if cls not in known:
        module = sys.modules.get(getattr(cls, "__module__", None) or "")
        known[cls] = os.path.realpath(getattr(module, "__file__", None) or "/").startswith(PACK)
    return known[cls]


def _carries_seacache(obj) -> bool:
    """A MODEL (ModelPatcher) with SeaCache's settings or keyed wrappers on it."""
    if not isinstance(obj, comfy.model_patcher.ModelPatcher):
        return False
    options = obj.model_options.get("transformer_options", {})
    wrappers = list(options.get("wrappers", {}).values()) + list(obj.wrappers.values())
    return SETTINGS_OPTION in options or any(WRAPPER_KEY in by_key for by_key in wrappers)


@server.PromptServer.instance.routes.get("/seacache_probe/retention")
async def retention(request):
    gc.collect()
    objects = gc.get_objects()
    out = {"tensors": sum(1 for o in objects if isinstance(o, torch.Tensor)),
           "pack_objects": dict(Counter(type(o).__name__ for o in objects if _pack_class(type(o)))),
           "seacache_models": sum(1 for o in objects if _carries_seacache(o))}
    types = Counter(type(o).__qualname__ for o in objects) if request.query.get("trace") else None
    del objects
    out["rss"] = _rss()
    if types is not None:
        out["trace"] = _trace(types)
    return web.json_response(out)


_PREVIOUS = {}


def _trace(types: Counter) -> dict:
    """Allocation sites (this probe's own left out) and object types grown since the previous traced call."""
    if not tracemalloc.is_tracing():
        tracemalloc.start(12)
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__),
                                                          tracemalloc.Filter(False, __file__, all_frames=True)])
    sites, grown = [], []
    if _PREVIOUS:
        for stat in snapshot.compare_to(_PREVIOUS["snapshot"], "traceback")[:12]:
            frames = [f"{f.filename}:{f.lineno}" for f in reversed(stat.traceback)]  # the allocation first
            sites.append({"size_diff": stat.size_diff, "count_diff": stat.count_diff, "frames": frames})
        grown = sorted(((n - _PREVIOUS["types"].get(t, 0), t) for t, n in types.items()), reverse=True)[:15]
    _PREVIOUS.update(snapshot=snapshot, types=types)
    return {"traced": tracemalloc.get_traced_memory()[0], "sites": sites, "types": [[t, d] for d, t in grown if d > 0]}


class SoakTinyModel:
    """A tiny random-weight core model and its two conditionings (benchmarks/soak.py's core prompts)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": (["wan21_t2v", "flux"],), "seed": ("INT", {"default": 0})}}

    RETURN_TYPES = ("MODEL", "CONDITIONING", "CONDITIONING")
    FUNCTION = "build"
    CATEGORY = "soak"

    def build(self, name, seed):
        spec = tiny_comfy_models.SPECS[name]
        return (tiny_comfy_models.build(name), tiny_comfy_models.conditioning(spec, seed),
                tiny_comfy_models.conditioning(spec, seed + 1))


NODE_CLASS_MAPPINGS = {"SoakTinyModel": SoakTinyModel}
