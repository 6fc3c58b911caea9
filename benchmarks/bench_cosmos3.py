"""Cost of one Cosmos3 call with and without the text K/V cache, and host memory of a sharded load.

Run as `python -m benchmarks.bench_cosmos3` (no ComfyUI needed; ``--smoke``: the ``tiny`` preset, a small latent and
one repeat, seconds on the CPU). Prints numbers; asserts nothing about time.

(a) One full model call of the ``medium`` preset on the CPU: batch 2 (cond + uncond with prompts of 180 and
    60 tokens), latent [2, 48, 9, 16, 16] (256x256, 33 frames), fp32 and bf16 compute. "cache on" passes a
    warm ``TextKVCache`` (a later denoising step: the text pathway is skipped), "cache off" recomputes the
    text pathway every call. Median of a few calls after a warm-up, the variants taking turns (so a shared
    CPU's load hits them alike); the text pathway alone (``compute_text_kv``) is timed too.
(b) Peak host memory of loading the sharded ``medium`` checkpoint (bf16), each approach in a fresh
    subprocess so earlier allocations do not count. "streamed" emulates the ComfyUI loader: the model is
    built without initialisation (under ``torch.device("meta")``, then ``to_empty`` on the CPU, in the
    checkpoint's dtype) and ``load_weights`` copies tensor by tensor from each shard. "naive" reads every
    shard with ``safetensors.torch.load_file`` into one dict, then calls ``load_state_dict``. The peak RSS
    growth (VmHWM after the load minus VmRSS before model construction, the high-water mark reset first
    where the kernel allows) is compared to the bytes of the model's weights, and so is the peak growth of
    anonymous memory alone (RssAnon sampled every millisecond). Peak RSS also counts the page-cache pages of
    shards safetensors has mmapped (``safe_open`` while a shard is open; ``load_file`` returns mmap-backed
    tensors, so the naive dict keeps every shard mapped until it is dropped). With ``COMFYUI_PATH`` set, the
    pack's own ComfyUI loader is measured too ("comfyui": weights through ComfyUI's ``load_torch_file`` and
    ``load_state_dict`` shard by shard, in the dtype ComfyUI picks on the CPU, fp32; "comfyui-dynamic": the same
    with dynamic VRAM emulated, ComfyUI >= 0.33).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

from cosmos3 import (
    TEXT_KV_CACHE_KEY,
    Cosmos3Config,
    Cosmos3Transformer,
    TextKVCache,
    load_weights,
    read_config,
    shard_files,
)

LATENT_SHAPE = (2, 48, 9, 16, 16)  # 256x256, 33 frames after the 4x temporal / 16x spatial VAE
PROMPT_LENGTHS = (180, 60)  # cond, uncond (padded with -1 to the longest)
REPEATS = 3
SMOKE = dict(preset="tiny", latent_shape=(2, 48, 2, 4, 4), repeats=1)
ROOT = Path(__file__).resolve().parents[1]  # the subprocess measuring a load runs this module from here
MB = 1024**2


# ---------------------------------------------------------------------------------------------- (a) call cost
def _interleaved_medians(fns: dict, repeats: int) -> dict:
    """Median ms of each function; one warm-up call each, then the functions take turns so that load from
    other processes on a shared CPU affects all of them alike."""
    for fn in fns.values():
        fn()  # warm-up: allocator, kernels, and (cache on) the cache's first miss
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def _inputs(config: Cosmos3Config, dtype: torch.dtype, latent_shape):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(latent_shape, generator=gen).to(dtype)
    longest = max(PROMPT_LENGTHS)
    token_ids = torch.full((len(PROMPT_LENGTHS), longest), -1, dtype=torch.long)
    for row, n in enumerate(PROMPT_LENGTHS):
        token_ids[row, :n] = torch.randint(0, config.vocab_size, (n,), generator=gen)
    sigma = torch.full((latent_shape[0],), 0.6)
    return x, sigma, token_ids


@torch.inference_mode()
def call_cost(config: Cosmos3Config, dtype: torch.dtype, latent_shape, repeats: int) -> tuple[float, float, float]:
    """Median ms of one call with a warm text K/V cache, without one, and of the text pathway alone."""
    torch.manual_seed(0)
    model = Cosmos3Transformer(config, dtype=dtype).eval()
    x, sigma, token_ids = _inputs(config, dtype, latent_shape)
    cache = TextKVCache()
    ms = _interleaved_medians({
        "on": lambda: model(x, sigma, token_ids, fps=16, transformer_options={TEXT_KV_CACHE_KEY: cache}),
        "off": lambda: model(x, sigma, token_ids, fps=16, transformer_options={}),
        "text": lambda: model.compute_text_kv(token_ids, dtype),
    }, repeats)
    assert cache.misses == 1 and cache.hits == repeats, (cache.misses, cache.hits)  # the cache really was warm
    on_ms, off_ms, text_ms = ms["on"], ms["off"], ms["text"]
    return on_ms, off_ms, text_ms


# ---------------------------------------------------------------------------------------------- (b) load memory
def _status_kb(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def _reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class _AnonPeak:
    """Samples RssAnon every millisecond from a thread: the kernel keeps no high-water mark of anonymous memory
    alone, and VmHWM also counts the page-cache pages of the shard safetensors has mmapped while it is open."""

    def __init__(self):
        self.peak_kb = _status_kb("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(0.001):
            self.peak_kb = max(self.peak_kb, _status_kb("RssAnon"))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, _status_kb("RssAnon"))


def measured(load) -> dict:
    """Host-memory growth and time of ``load()`` (which returns the loaded ``nn.Module``), from a reset peak."""
    reset = _reset_peak()
    before, anon_before = _status_kb("VmRSS"), _status_kb("RssAnon")
    start = time.perf_counter()
    with _AnonPeak() as anon:
        model = load()
    seconds = time.perf_counter() - start
    peak = _status_kb("VmHWM")
    return {
        "peak_growth": (peak - before) * 1024,
        "anon_peak_growth": (anon.peak_kb - anon_before) * 1024,
        "after_growth": (_status_kb("VmRSS") - before) * 1024,
        "weight_bytes": sum(t.numel() * t.element_size() for t in model.state_dict().values()),
        "seconds": seconds,
        "hwm_reset": reset,
    }


@torch.no_grad()
def measure_load(mode: str, checkpoint: str) -> dict:
    """Run in a fresh process: build the model without initialisation and load the checkpoint one way."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    if mode.startswith("comfyui"):
        return measure_comfyui_load(mode, checkpoint)
    files = shard_files(checkpoint)
    config = read_config(checkpoint)
    dtype = torch.bfloat16  # the checkpoint's dtype
    # Warm-up outside the measurement: the first model construction under the meta device and the first
    # to_empty/safe_open pull in lazily imported torch and safetensors code (~160 MB RSS, not weights).
    with torch.device("meta"):
        Cosmos3Transformer(config, dtype=dtype)
    torch.nn.Linear(4, 4, device="meta", dtype=dtype).to_empty(device="cpu")
    with safe_open(files[0], framework="pt") as f:
        f.keys()

    def load():
        with torch.device("meta"):
            model = Cosmos3Transformer(config, dtype=dtype)
        model = model.to_empty(device="cpu")  # uninitialised storage, like comfy.ops.disable_weight_init
        if mode == "streamed":
            load_weights(model, files)
        elif mode == "naive":
            state = {}
            for file in files:
                state.update(load_file(file))
            model.load_state_dict(state, strict=False)  # lm_head/norm of the checkpoint are not model weights
            del state
        else:
            raise ValueError(mode)
        return model

    return measured(load)


@torch.no_grad()
def measure_comfyui_load(mode: str, checkpoint: str) -> dict:
    """Run in a fresh process: the pack's ComfyUI loader path (``nodes.cosmos3.patcher``) in a CPU ComfyUI from
    ``$COMFYUI_PATH``; "comfyui-dynamic" first switches dynamic VRAM on as ``main.py`` does (ComfyUI >= 0.33)."""
    from seacache_testing import comfyui_harness

    ns = comfyui_harness.comfy_session(os.environ["COMFYUI_PATH"])
    if mode == "comfyui-dynamic":
        import comfy.memory_management
        import comfy_aimdo.control

        comfy_aimdo.control.init()
        comfy.memory_management.aimdo_enabled = True
        ns.model_patcher.CoreModelPatcher = ns.model_patcher.ModelPatcherDynamic
    loading = comfyui_harness.import_pack_module("nodes.cosmos3.patcher")
    return measured(lambda: loading.load_cosmos3_model(checkpoint, "default").model.diffusion_model)


def load_in_subprocess(mode: str, checkpoint: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_cosmos3", "--measure-load", mode, checkpoint],
        cwd=ROOT, check=True, capture_output=True, text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------- main
def main(preset: str = "medium", latent_shape=LATENT_SHAPE, repeats: int = REPEATS) -> None:
    from seacache_testing.make_tiny_checkpoint import PRESETS, make_tiny_checkpoint

    config = Cosmos3Config(**PRESETS[preset].sizes)
    b, c, t, h, w = latent_shape
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(
        f"(a) one call, {preset} preset ({config.num_hidden_layers} layers, hidden {config.hidden_size}), CPU, "
        f"latent {list(latent_shape)} = {config.token_count(t, h, w)} gen tokens/item, "
        f"prompts {'+'.join(map(str, PROMPT_LENGTHS))} tokens; median of {repeats}"
    )
    for dtype in (torch.float32, torch.bfloat16):
        on_ms, off_ms, text_ms = call_cost(config, dtype, latent_shape, repeats)
        print(
            f"  {str(dtype).removeprefix('torch.'):8s} text K/V cache on {on_ms:8.1f} ms   off {off_ms:8.1f} ms   "
            f"off/on {off_ms / on_ms:4.2f}x   text pathway alone {text_ms:7.1f} ms"
        )
    with tempfile.TemporaryDirectory(prefix="cosmos3_bench_") as tmp:
        root = make_tiny_checkpoint(os.path.join(tmp, preset), preset=preset, seed=0)
        files = shard_files(root)
        file_bytes = sum(os.path.getsize(f) for f in files)
        print(
            f"(b) host memory while loading the {preset} checkpoint ({len(files)} shards, {file_bytes / MB:.1f} MB on "
            f"disk, bf16), fresh process each,"
            f" growth from before model construction, x = per byte of model weights"
        )
        modes = [("streamed", "meta+to_empty+load_weights"), ("naive", "load_file all+load_state_dict")]
        if os.environ.get("COMFYUI_PATH"):
            modes.append(("comfyui", "pack loader in ComfyUI"))
            if (Path(os.environ["COMFYUI_PATH"]) / "comfy" / "memory_management.py").is_file():
                modes.append(("comfyui-dynamic", "same, dynamic VRAM emulated"))
        for mode, label in modes:
            r = load_in_subprocess(mode, root)
            w = r["weight_bytes"]
            note = "" if r["hwm_reset"] else " (VmHWM not resettable: peak includes startup)"
            print(
                f"  {mode:15s} {label:29s} weights {w / MB:5.1f} MB  peak RSS +{r['peak_growth'] / MB:6.1f} MB "
                f"{r['peak_growth'] / w:4.2f}x  peak anon +{r['anon_peak_growth'] / MB:6.1f} MB "
                f"{r['anon_peak_growth'] / w:4.2f}x  after +{r['after_growth'] / MB:5.1f} MB  "
                f"{r['seconds']:.2f} s{note}"
            )
        print("  (peak RSS includes page-cache pages of shards safetensors has mmapped; anon: sampled every 1 ms)")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--measure-load":
        print(json.dumps(measure_load(sys.argv[2], sys.argv[3])))
    else:
        main(**(SMOKE if sys.argv[1:] == ["--smoke"] else {}))
