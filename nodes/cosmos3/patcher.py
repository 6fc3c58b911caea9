"""Cosmos3 transformer weights into a ComfyUI model, the way ComfyUI loads its own diffusion models.

The version at hand decides (feature-detected, never by version string): the patcher class ComfyUI's loaders use
(``CoreModelPatcher``, dynamic VRAM on NVIDIA, where it exists), ``assign`` loading under a dynamic patcher,
shard reading through ``comfy.utils.load_torch_file`` (zero-copy mmap under dynamic VRAM), and a
``cached_patcher_init`` factory so multi-GPU / device-selection nodes can rebuild the model.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import torch

import comfy.model_management
import comfy.model_patcher
import comfy.patcher_extension
import comfy.utils

from ...cosmos3 import check_checkpoint, expected_tensors, read_config, require_cosmos3_keys, shard_files, tensor_shapes
from .supported_model import Cosmos3ModelConfig
from .sampling_wrappers import keep_conditioned_outer_sample, text_kv_outer_sample

log = logging.getLogger(__name__)

TEXT_KV_WRAPPER_KEY = "cosmos3_text_kv"
KEEP_WRAPPER_KEY = "cosmos3_keep_conditioned"
WEIGHT_DTYPES = {"default": None, "fp8_e4m3fn": torch.float8_e4m3fn, "fp8_e4m3fn_fast": torch.float8_e4m3fn,
                 "fp8_e5m2": torch.float8_e5m2}
FP8_MATMUL = ("fp8_e4m3fn_fast",)
"""Weight dtypes that ask ComfyUI for its fp8 matrix multiplication (``model_config.optimizations["fp8"]``, what
ComfyUI's own diffusion-model loader does for the same name); ComfyUI's ``--fast`` asks for it for every fp8 model.
ComfyUI's operation picker grants it only on a device that computes in fp8 (NVIDIA sm_89 and newer)."""


def patcher_class(disable_dynamic: bool = False):
    """The ModelPatcher class ComfyUI's own loaders create: ``CoreModelPatcher`` where this ComfyUI has it (dynamic
    VRAM on NVIDIA GPUs, a plain patcher elsewhere), ``ModelPatcher`` when asked for a non-dynamic one."""
    if disable_dynamic:
        return comfy.model_patcher.ModelPatcher
    return getattr(comfy.model_patcher, "CoreModelPatcher", comfy.model_patcher.ModelPatcher)


def is_dynamic(patcher) -> bool:
    """Whether the patcher streams weights itself (dynamic VRAM): then weights are assigned, not copied."""
    return bool(getattr(patcher, "is_dynamic", lambda: False)())


@torch.no_grad()
def load_shards(diffusion_model: torch.nn.Module, files: list[str], expected: dict, assign: bool) -> int:
    """Load each shard through ``load_state_dict`` (so ComfyUI's operations receive their weights, lazily built
    ones included), module by module, each tensor cast to the dtype the model stores it in just before its module
    takes it: host memory stays near one copy of the weights. Returns the number of tensors loaded."""
    loaded = 0
    for file in files:
        shard = comfy.utils.load_torch_file(file)  # mmap-backed: pages are read as tensors are used
        by_module = defaultdict(list)
        for key in shard:
            if key in expected:
                by_module[key.rpartition(".")[0]].append(key)
        for module, keys in by_module.items():
            tensors = {key.rpartition(".")[2]: shard.pop(key).to(expected[key][1]) for key in keys}
            _, unexpected = diffusion_model.get_submodule(module).load_state_dict(tensors, strict=False, assign=assign)
            if unexpected:
                raise RuntimeError(f"Cosmos3: module {module!r} rejected {unexpected} while loading {file}.")
            loaded += len(tensors)
        shard.clear()
    return loaded


def read_checkpoint(path: str):
    """Shard files, key -> shape and config of the Cosmos3 transformer checkpoint at ``path``, from the
    safetensors headers alone; raises naming the path when files are missing or it is not Cosmos3."""
    files = shard_files(path)
    shapes = tensor_shapes(files)
    require_cosmos3_keys(shapes, path)
    return files, shapes, read_config(path, shapes)


def load_cosmos3_model(path: str, weight_dtype: str = "default", audio_vae_config=None, disable_dynamic: bool = False):
    """The ModelPatcher of the Cosmos3 transformer at ``path`` (checkpoint folder, ``transformer/`` or merged file).

    Checks the checkpoint against its config from the safetensors headers before reading any weight (errors name
    the path and the keys), builds the model without initialising weights, and loads it shard by shard through
    ComfyUI's loading path. fp8 weight dtypes store fp8 and compute in bf16/fp32; the layers are ComfyUI's
    operations picked by ComfyUI for the model's dtypes, so ``fp8_e4m3fn_fast`` (or ComfyUI's ``--fast``) gets
    ComfyUI's fp8 matrix multiplication where the device supports it. The per-run text K/V cache and
    the exact return of conditioned (I2V) frames are installed as outer-sample wrappers. The checkpoint's audio VAE
    config (``sound_tokenizer/``, None without one) rides on the model for the run-start sound checks. Registered as
    the patcher's ``cached_patcher_init`` so ComfyUI can rebuild it (``disable_dynamic`` is what it passes for that).
    """
    if weight_dtype not in WEIGHT_DTYPES:
        raise ValueError(f"weight_dtype must be one of {list(WEIGHT_DTYPES)}, got {weight_dtype!r}.")
    files, shapes, config = read_checkpoint(path)
    load_device = comfy.model_management.get_torch_device()
    offload_device = comfy.model_management.unet_offload_device()
    model_config = Cosmos3ModelConfig(config)
    dtype = WEIGHT_DTYPES[weight_dtype] or comfy.model_management.unet_dtype(
        model_params=config.parameter_count(), supported_dtypes=model_config.supported_inference_dtypes
    )
    expected = expected_tensors(config, dtype)
    check_checkpoint(shapes, expected, repr(path))
    manual_cast = comfy.model_management.unet_manual_cast(dtype, load_device, model_config.supported_inference_dtypes)
    model_config.set_inference_dtype(dtype, manual_cast)
    if weight_dtype in FP8_MATMUL:
        model_config.optimizations["fp8"] = True  # read by comfy.ops.pick_operations when the model is built
    model = model_config.get_model({}, device=offload_device)
    model.audio_vae_config = audio_vae_config
    patcher = patcher_class(disable_dynamic)(model, load_device=load_device, offload_device=offload_device)
    count = load_shards(model.diffusion_model, files, expected, assign=is_dynamic(patcher))
    log.info("Cosmos3: loaded %d tensors from %d file(s) as %s (compute %s, %s).", count, len(files), dtype,
             manual_cast or dtype, type(patcher).__name__)
    outer_sample = comfy.patcher_extension.WrappersMP.OUTER_SAMPLE
    patcher.add_wrapper_with_key(outer_sample, TEXT_KV_WRAPPER_KEY, text_kv_outer_sample)
    patcher.add_wrapper_with_key(outer_sample, KEEP_WRAPPER_KEY, keep_conditioned_outer_sample)
    patcher.cached_patcher_init = (load_cosmos3_model, (path, weight_dtype, audio_vae_config))
    return patcher
