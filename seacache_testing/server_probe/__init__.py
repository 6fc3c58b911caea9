"""A probe that benchmarks load into a real ComfyUI server as a custom node (never part of the pack's nodes): the
server's memory as the benchmark reads it between prompts, and the settings a run asks for at server start.

Environment, read once when ComfyUI loads this folder (before any prompt):
- ``SEACACHE_PROBE_CAP_GIB``: on CUDA, a hard wall for torch's allocator at that many GiB
  (``torch.cuda.set_per_process_memory_fraction``), beside the ``--reserve-vram`` the server was started with.
- ``SEACACHE_PROBE_EMULATE_DYNAMIC_VRAM=1``: dynamic VRAM the way ``tests/test_comfy_dynamic_vram.py`` emulates
  it on the CPU, where ``main.py`` does not start it (on NVIDIA ``main.py`` itself starts it).

Routes: ``GET /seacache_probe/memory`` (peaks since the last reset: torch's ``max_memory_allocated``, the device's
used memory sampled every 10 ms from ``torch.cuda.mem_get_info``, its total, the process's RSS, whether dynamic
VRAM is on) and ``POST /seacache_probe/memory`` (reset the peaks).
"""

import os
import threading
import time

import torch
from aiohttp import web

import comfy.model_management
import comfy.model_patcher
import server

NODE_CLASS_MAPPINGS = {}
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
