"""Tiny random-weight versions of ComfyUI's own core models (Wan 2.1/2.2, HunyuanVideo, LTX-Video, LTX-2, Flux,
Qwen-Image, Lumina 2), built through ComfyUI's model configs (``comfy.supported_models``) on the CPU.

Each spec gives the config class and a superset of constructor arguments; arguments a ComfyUI version does not
know are dropped by inspecting the model class (or its params dataclass), so one spec builds on 0.3.64 and 0.33.
Weights are seeded random (norm scales 1), so two builds of one spec are identical. Used by the integration
tests, the workflow runner's overrides and the end-to-end benchmark.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TinySpec:
    """A tiny model: ComfyUI config class, constructor arguments, latent shape per item, text width."""

    config: str
    model_class: tuple
    unet: dict
    latent: tuple
    context_dim: int
    pooled_dim: int | None = None
    family: str = "video"
    attention_mask: bool = False
    audio_latent: tuple | None = None  # audio-video models: the audio latent's shape per item (a NestedTensor latent)


WAN = dict(image_model="wan2.1", patch_size=(1, 2, 2), dim=128, ffn_dim=256, freq_dim=256, text_dim=4096, num_heads=1,
           num_layers=2, window_size=(-1, -1), qk_norm=True, cross_attn_norm=True, eps=1e-6)
FLUX = dict(image_model="flux", in_channels=16, out_channels=16, vec_in_dim=32, context_in_dim=64, hidden_size=128,
            mlp_ratio=2.0, num_heads=2, depth=2, depth_single_blocks=2, axes_dim=[16, 24, 24], theta=10000,
            patch_size=2, qkv_bias=True, guidance_embed=False, txt_ids_dims=[])
HUNYUAN = dict(image_model="hunyuan_video", in_channels=16, out_channels=16, vec_in_dim=32, context_in_dim=64,
               hidden_size=128, mlp_ratio=2.0, num_heads=2, depth=1, depth_single_blocks=2, axes_dim=[16, 24, 24],
               theta=256, patch_size=[1, 2, 2], qkv_bias=True, guidance_embed=False, byt5=False, meanflow=False,
               use_cond_type_embedding=False, vision_in_dim=None, meanflow_sum=False)

WAN_CLASS = ("comfy.ldm.wan.model", "WanModel")

SPECS = {
    "wan21_t2v": TinySpec("WAN21_T2V", WAN_CLASS, {**WAN, "model_type": "t2v", "in_dim": 16, "out_dim": 16}, (16, 3, 8, 8), 4096),
    "wan21_i2v": TinySpec("WAN21_I2V", WAN_CLASS, {**WAN, "model_type": "i2v", "in_dim": 36, "out_dim": 16}, (16, 3, 8, 8), 4096),
    "wan22_ti2v_5b": TinySpec("WAN22_T2V", WAN_CLASS, {**WAN, "model_type": "t2v", "in_dim": 48, "out_dim": 48}, (48, 3, 8, 8), 4096),
    "hunyuan_video": TinySpec("HunyuanVideo", ("comfy.ldm.hunyuan_video.model", "HunyuanVideo"), HUNYUAN, (16, 3, 8, 8), 64, pooled_dim=32),
    "ltxv": TinySpec("LTXV", ("comfy.ldm.lightricks.model", "LTXVModel"), dict(image_model="ltxv", in_channels=128, cross_attention_dim=64, attention_head_dim=32,
                                  num_attention_heads=2, caption_channels=64, num_layers=2), (128, 2, 4, 4), 64,
                     attention_mask=True),
    # LTX-2: processed prompt embeddings are 2 x caption_channels wide (video and audio halves); audio latent
    # [8 channels, frames, 16 mel bins] beside the video latent (ComfyUI's NestedTensor audio-video latent).
    "ltxav": TinySpec("LTXAV", ("comfy.ldm.lightricks.av_model", "LTXAVModel"),
                      dict(image_model="ltxav", in_channels=128, audio_in_channels=128, cross_attention_dim=64,
                           audio_cross_attention_dim=32, attention_head_dim=32, audio_attention_head_dim=16,
                           num_attention_heads=2, audio_num_attention_heads=2, caption_channels=64, num_layers=2),
                      (128, 2, 4, 4), 128, attention_mask=True, audio_latent=(8, 5, 16)),
    "flux": TinySpec("Flux", ("comfy.ldm.flux.model", "Flux"), FLUX, (16, 16, 16), 64, pooled_dim=32, family="image"),
    "qwen_image": TinySpec("QwenImage", ("comfy.ldm.qwen_image.model", "QwenImageTransformer2DModel"), dict(image_model="qwen_image", patch_size=2, in_channels=64, out_channels=16,
                                             num_layers=2, attention_head_dim=32, num_attention_heads=2,
                                             joint_attention_dim=64, pooled_projection_dim=32,
                                             axes_dims_rope=(8, 12, 12)), (16, 16, 16), 64, family="image"),
}

# Wan variants whose control inputs ride on the model's own inputs (composition tests, not the any-model matrix).
CONTROL_SPECS = {
    "wan21_vace": TinySpec("WAN21_Vace", ("comfy.ldm.wan.model", "VaceWanModel"),
                           {**WAN, "model_type": "vace", "in_dim": 16, "out_dim": 16, "vace_layers": 1, "vace_in_dim": 96},
                           (16, 3, 8, 8), 4096),
    "wan21_fun_control": TinySpec("WAN21_FunControl2V", WAN_CLASS, {**WAN, "model_type": "i2v", "in_dim": 48, "out_dim": 16},
                                  (16, 3, 8, 8), 4096),
}

# A model SeaCache serves through the diffusion-model call (no block seam) whose forward hands transformer_options to
# the DIFFUSION_MODEL wrappers as a keyword argument: Lumina 2's NextDiT (newer ComfyUI's Z-Image uses the class too).
CALL_SEAM_SPECS = {
    "lumina2": TinySpec("Lumina2", ("comfy.ldm.lumina.model", "NextDiT"),
                        dict(image_model="lumina2", patch_size=2, in_channels=16, dim=64, n_layers=2, n_refiner_layers=1,
                             n_heads=2, n_kv_heads=2, multiple_of=16, norm_eps=1e-5, qk_norm=True, cap_feat_dim=64,
                             axes_dims=(8, 12, 12), axes_lens=(64, 64, 64)),
                        (16, 16, 16), 64, family="image", attention_mask=True),
}

# A larger Wan and Flux for the benchmark, where the block stack dominates a call.
MEDIUM = {
    "wan21_t2v": dataclasses.replace(SPECS["wan21_t2v"], unet={**SPECS["wan21_t2v"].unet, "dim": 384, "ffn_dim": 1536, "num_heads": 3, "num_layers": 6}, latent=(16, 3, 16, 16)),
    "flux": dataclasses.replace(SPECS["flux"], unet={**FLUX, "hidden_size": 384, "num_heads": 3, "mlp_ratio": 4.0, "depth": 2, "depth_single_blocks": 4, "axes_dim": [16, 56, 56]}, latent=(16, 32, 32)),
}


def accepted_arguments(unet: dict, model_class) -> dict:
    """The constructor arguments this ComfyUI's model class takes (the fields of its params dataclass for Flux
    and HunyuanVideo, which pass their keyword arguments on to one)."""
    module = importlib.import_module(model_class.__module__)
    params = getattr(module, f"{model_class.__name__}Params", None)
    if params is not None and dataclasses.is_dataclass(params):
        names = {f.name for f in dataclasses.fields(params)} | {"image_model"}
        return {k: v for k, v in unet.items() if k in names}
    signature = inspect.signature(model_class.__init__)
    if any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
        return dict(unet)
    return {k: v for k, v in unet.items() if k in signature.parameters}


def randomize(module: torch.nn.Module, seed: int) -> None:
    """Seeded random weights: norm scales 1, everything else N(0, 0.05^2)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in module.named_parameters():
            if param.ndim == 1 and "norm" in name and name.endswith(("weight", "scale", "gamma")):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.05)


def spec_of(name: str) -> TinySpec:
    """The spec ``name`` of :data:`SPECS`, :data:`CONTROL_SPECS` or :data:`CALL_SEAM_SPECS`."""
    return {**SPECS, **CONTROL_SPECS, **CALL_SEAM_SPECS}[name]


def missing(name: str) -> str | None:
    """Why this ComfyUI cannot build model ``name`` (its class, or NestedTensor latents for audio-video models),
    None when it can."""
    spec = SPECS[name]
    if importlib.util.find_spec(spec.model_class[0]) is None:
        return f"this ComfyUI has no {spec.model_class[0]}"
    if spec.audio_latent is not None and importlib.util.find_spec("comfy.nested_tensor") is None:
        return "this ComfyUI has no NestedTensor audio-video latents"
    return None


def build(name: str | TinySpec, seed: int = 0, medium: bool = False):
    """A ModelPatcher holding the tiny (or medium) model ``name`` of :data:`SPECS` (or the spec ``name`` itself), on
    the CPU in float32."""
    import comfy.model_patcher
    import comfy.supported_models

    spec = name if isinstance(name, TinySpec) else MEDIUM[name] if medium else spec_of(name)
    module, class_name = spec.model_class
    unet = accepted_arguments(spec.unet, getattr(importlib.import_module(module), class_name))
    config = getattr(comfy.supported_models, spec.config)(unet)
    config.set_inference_dtype(torch.float32, None)
    base = config.get_model({}, device=torch.device("cpu"))
    randomize(base.diffusion_model, seed)
    patcher_class = getattr(comfy.model_patcher, "CoreModelPatcher", comfy.model_patcher.ModelPatcher)
    return patcher_class(base, load_device=torch.device("cpu"), offload_device=torch.device("cpu"))


def conditioning(spec: TinySpec, seed: int, batch: int = 1):
    """A CONDITIONING with a random prompt embedding (and pooled vector where the model takes one)."""
    generator = torch.Generator().manual_seed(seed)
    extra = {}
    if spec.pooled_dim:
        extra["pooled_output"] = torch.randn(batch, spec.pooled_dim, generator=generator)
    if spec.attention_mask:
        extra["attention_mask"] = torch.ones(batch, 6, dtype=torch.long)
    return [[torch.randn(batch, 6, spec.context_dim, generator=generator), extra]]


def empty_latent(spec: TinySpec, batch: int = 1) -> dict:
    """A LATENT of zeros with the spec's shape (video and audio joined as ComfyUI's NestedTensor for AV models)."""
    video = torch.zeros(batch, *spec.latent)
    if spec.audio_latent is None:
        return {"samples": video}
    from comfy.nested_tensor import NestedTensor

    return {"samples": NestedTensor([video, torch.zeros(batch, *spec.audio_latent)])}
