"""The real community ComfyUI-Cosmos3 pack (RyukoMatoiFan/ComfyUI-Cosmos3) for integration tests: where it is, how
ComfyUI loads it, and a tiny random-weight checkpoint in its format.

The pack is never part of this repository. Its folder comes from ``$COSMOS3_COMMUNITY_PATH`` or
``<ComfyUI>/custom_nodes/ComfyUI-Cosmos3``; the tests skip, saying so, when neither exists or the ComfyUI in use
cannot run it. The checkpoint is what the pack's loader reads: ``transformer/config.json`` plus one safetensors
file of the transformer's keys, in bf16 (the pack's storage dtype), with the tiny sizes below.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

PACK_ENV = "COSMOS3_COMMUNITY_PATH"
PACK_FOLDER = "ComfyUI-Cosmos3"
TESTED_COMMIT = "b9226bf"
# Tiny config: 3 layers (first, middle, last), GQA 2:1 heads of width 16, mRoPE sections summing to head_dim / 2,
# sound branch on (packed audio-video latents). Latent channels and patch size are the pack's fixed 48 and 2.
TINY_CONFIG = {
    "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1,
    "head_dim": 16, "intermediate_size": 64, "latent_channel": 48, "latent_patch_size": 2,
    "patch_latent_dim": 192, "vocab_size": 64, "rope_theta": 10000.0, "rope_scaling": {"mrope_section": [4, 2, 2]},
    "base_fps": 24, "timestep_scale": 0.001, "unified_3d_mrope_temporal_modality_margin": 100,
    "rms_norm_eps": 1e-6, "sound_gen": True, "sound_dim": 64,
}


def pack_path(comfy) -> Path:
    """The community pack's folder, or skip the test with the reason."""
    configured = os.environ.get(PACK_ENV, "").strip()
    path = Path(configured) if configured else Path(comfy.path) / "custom_nodes" / PACK_FOLDER
    if not (path / "cosmos3" / "model.py").is_file():
        pytest.skip(f"the community ComfyUI-Cosmos3 pack (RyukoMatoiFan/ComfyUI-Cosmos3 at {TESTED_COMMIT}) was not "
                    f"found: set {PACK_ENV} to its folder or place it in ComfyUI's custom_nodes/{PACK_FOLDER}")
    needed = {"BaseModel.get_dtype_inference": (comfy.model_base.BaseModel, "get_dtype_inference"),
              "ModelPatcher.is_dynamic": (comfy.model_patcher.ModelPatcher, "is_dynamic")}
    missing = [name for name, (owner, attr) in needed.items() if not hasattr(owner, attr)]
    if missing:
        pytest.skip(f"ComfyUI {comfy.version} cannot run the community pack: its model calls {', '.join(missing)}, "
                    "which this ComfyUI does not have")
    return path


def load_pack(comfy, path: Path):
    """Register the pack's nodes with ComfyUI's own custom-node loader; returns its package module."""
    name = str(path).replace(".", "_x_")
    if name not in sys.modules:
        from . import comfyui_harness

        ok = comfyui_harness._run(comfy.nodes.load_custom_node(str(path), module_parent="custom_nodes"))
        assert ok, f"ComfyUI could not load {path}"
    return sys.modules[name]


def submodule(package, relname: str):
    """``<pack>.<relname>`` (e.g. ``cosmos3.loader``), imported as ComfyUI imported the pack."""
    import importlib

    return importlib.import_module(f"{package.__name__}.{relname}")


INT4_GROUP = 16


def int4_parts(weight: torch.Tensor, gen: torch.Generator) -> dict:
    """A pre-quantized int4 ConvRot layer as the pack's loader reads it (``awq_w4a16``, comfy_kitchen's packing:
    two uint4 per byte along K, per-group bf16 scales and zeros of shape [K / group, N]): random codes whose
    dequantized rows have the scale of ``weight``."""
    out_features, in_features = weight.shape
    codes = torch.randint(0, 16, (out_features, in_features), generator=gen, dtype=torch.int32)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
    groups = (in_features // INT4_GROUP, out_features)
    scale = (weight.float().abs().mean() / 4).expand(groups).to(torch.bfloat16).contiguous()
    marker = {"format": "awq_w4a16", "group_size": INT4_GROUP, "orig_shape": [out_features, in_features]}
    return {"weight": packed, "weight_scale": scale, "weight_zeros": torch.zeros(groups, dtype=torch.bfloat16),
            "comfy_quant": torch.tensor(list(json.dumps(marker).encode("utf-8")), dtype=torch.uint8)}


def write_checkpoint(root: Path, transformer_cls, seed: int = 0, int4_mlps: bool = False) -> Path:
    """A model folder the pack's loader reads: ``transformer/config.json`` and random bf16 weights for every key of
    the pack's transformer built from that config (norm weights near 1, the rest small); ``int4_mlps``: every MLP
    projection pre-quantized to int4 ConvRot instead, as the pack's int4 checkpoints ship them."""
    import comfy.ops

    from_config = {k: v for k, v in TINY_CONFIG.items() if k != "unified_3d_mrope_temporal_modality_margin"}
    model = transformer_cls(operations=comfy.ops.manual_cast, dtype=torch.float32, device="cpu",
                            mrope_margin=TINY_CONFIG["unified_3d_mrope_temporal_modality_margin"], **from_config)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for key, value in model.state_dict().items():
        noise = torch.randn(value.shape, generator=gen)
        module = key.rsplit(".", 1)[0].rsplit(".", 1)[-1]
        state[key] = (1.0 + 0.1 * noise if "norm" in module and key.endswith(".weight") else 0.2 * noise).to(torch.bfloat16)
        if int4_mlps and ".mlp" in key and key.endswith("_proj.weight"):
            parts = int4_parts(state.pop(key), gen)
            state.update({f"{key[:-len('weight')]}{name}": tensor for name, tensor in parts.items()})
    transformer = root / "transformer"
    transformer.mkdir(parents=True, exist_ok=True)
    (transformer / "config.json").write_text(json.dumps(TINY_CONFIG))
    from safetensors.torch import save_file

    save_file(state, str(transformer / "diffusion_pytorch_model.safetensors"))
    return root
