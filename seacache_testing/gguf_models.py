"""Tiny GGUF diffusion models and LoRAs for the ComfyUI-GGUF tests: ComfyUI's own tiny Wan 2.1 T2V and Flux
(:mod:`tiny_comfy_models`, random weights) written as GGUF files with GGML-quantized weights by the ``gguf`` package's
``GGUFWriter`` (what city96's ``tools/convert.py`` writes with), for the pack's ``UnetLoaderGGUF`` to load.

Tensor types follow the pack's converter: 1-D tensors, tensors of at most 1024 elements, Wan's ``modulation``
tables and tensors of more than 4 dimensions (Wan's 5-D patch embedding, which the pack's ``fix_5d_tensors.py``
adds back in F32) stay F32; every other weight whose rows are whole quantization blocks is quantized. ``gguf`` 0.19
quantizes Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 in Python; its K-quants (Q4_K, ...) it only dequantizes.

ComfyUI builds a GGUF model from what its model detection reads off the weights. Wan's detection reads every size
the tiny Wan has. Flux's reads the width off ``img_in`` only in newer ComfyUI (0.33.0; 0.3.64 assumes Flux.1's
3072) and always assumes Flux.1's rope axes (16, 56, 56) and MLP ratio 4, so the GGUF Flux is the tiny Flux with
those: one head of 128 (:data:`FLUX`).
"""

from __future__ import annotations

import dataclasses
import os

import torch

from . import tiny_comfy_models

QUANTIZED_TYPES = ("Q8_0", "Q4_0")
SMALL = 1024  # the pack's converter keeps tensors of at most this many elements in F32 (QUANTIZATION_THRESHOLD)
FLUX = dataclasses.replace(tiny_comfy_models.SPECS["flux"], unet={**tiny_comfy_models.FLUX, "num_heads": 1,
                                                                  "axes_dim": [16, 56, 56], "mlp_ratio": 4.0})
SPECS = {"wan21_t2v": (tiny_comfy_models.SPECS["wan21_t2v"], "wan"), "flux": (FLUX, "flux")}
"""Model name -> (its tiny spec, the GGUF ``general.architecture`` the pack's loader checks)."""


def tensor_type(key: str, shape: tuple[int, ...], quantized):
    """The GGML type the pack's converter gives tensor ``key`` of ``shape`` when quantizing to ``quantized``."""
    import gguf

    block = gguf.GGML_QUANT_SIZES[quantized][0]
    numel = int(torch.Size(shape).numel())
    if len(shape) == 1 or len(shape) > 4 or numel <= SMALL or "modulation" in key or shape[-1] % block:
        return gguf.GGMLQuantizationType.F32
    return quantized


def write_gguf(state_dict: dict[str, torch.Tensor], path: str, arch: str, quantized: str) -> dict[str, int]:
    """Write ``state_dict`` (ComfyUI's diffusion-model keys) as a GGUF file of architecture ``arch`` with its weights
    quantized to ``quantized`` (a name of :data:`QUANTIZED_TYPES`); returns the count of tensors per GGML type."""
    import gguf

    writer = gguf.GGUFWriter(path=None, arch=arch)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    counts: dict[str, int] = {}
    for key, tensor in state_dict.items():
        array = tensor.detach().float().numpy()
        kind = tensor_type(key, array.shape, gguf.GGMLQuantizationType[quantized])
        writer.add_tensor(key, gguf.quants.quantize(array, kind), raw_dtype=kind)
        counts[kind.name] = counts.get(kind.name, 0) + 1
    writer.write_header_to_file(path=path)
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return counts


def write_model(name: str, folder: str, quantized: str, seed: int = 0) -> tuple[str, dict[str, int]]:
    """The tiny model ``name`` of :data:`SPECS` as ``<folder>/<name>-<quantized>.gguf``: (file name, tensor counts)."""
    spec, arch = SPECS[name]
    model = tiny_comfy_models.build(spec, seed=seed)
    file_name = f"{name}-{quantized}.gguf"
    counts = write_gguf(model.model.diffusion_model.state_dict(), os.path.join(folder, file_name), arch, quantized)
    return file_name, counts


def write_lora(model, modules: tuple[str, ...], path: str, rank: int = 4, seed: int = 5, scale: float = 0.05) -> None:
    """A LoRA file in ComfyUI's key format (``diffusion_model.<module>.lora_up/lora_down.weight``, alpha = rank) on
    the linear layers ``modules`` of ``model``'s diffusion model, random up and down matrices."""
    from safetensors.torch import save_file

    generator = torch.Generator().manual_seed(seed)
    state = {}
    for module in modules:
        out_features, in_features = model.model.diffusion_model.get_submodule(module).weight.shape
        prefix = f"diffusion_model.{module}"
        state[f"{prefix}.lora_up.weight"] = torch.randn(out_features, rank, generator=generator) * scale
        state[f"{prefix}.lora_down.weight"] = torch.randn(rank, in_features, generator=generator) * scale
        state[f"{prefix}.alpha"] = torch.tensor(float(rank))
    save_file(state, path)
