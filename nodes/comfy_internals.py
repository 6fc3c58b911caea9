"""The ComfyUI symbols this pack relies on that are no public surface (not ``comfy_api``, not the wrapper API of
``comfy.patcher_extension``, not ``transformer_options["patches_replace"]``), why each is needed, and the feature
check that refuses, naming the missing symbol and the fix, before anything runs on a ComfyUI that moved one.

Each entry is a dotted path: a module attribute, or a class attribute (a method) after the class. A path with
``#name`` names an attribute the instances carry: it cannot be read off the class, so the feature check skips it;
tests/test_comfy_internals.py reads it off a real instance (the guider's, at run start). ``optional`` entries are
feature-detected where they are used (their absence turns a feature off, or the node that needs them refuses on
its own), so the check never refuses for them; ``newer`` ones belong to features ComfyUI 0.3.x lacks. The table in
docs/comfyui-compatibility.md lists the same symbols with the ComfyUI versions read; the test checks that every
ComfyUI name the pack's code imports or reads off a module is listed here.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple


class Internal(NamedTuple):
    path: str
    why: str
    optional: bool = False
    newer: bool = False  # a feature of ComfyUI 0.33 and later (absent from 0.3.x): always optional


SEACACHE = "SeaCache"
FIRST_BLOCK = "SeaCache first-block gates"
COSMOS3 = "Cosmos3"

INTERNALS: dict[str, tuple[Internal, ...]] = {
    SEACACHE: (
        Internal("comfy.model_patcher.ModelPatcher.clone", "Apply patches a clone, so the input MODEL stays unchanged"),
        Internal("comfy.model_patcher.ModelPatcher.get_model_object", "the final MODEL's model_sampling at run start"),
        Internal("comfy.model_patcher.ModelPatcher#model_options", "where Apply keeps its settings; the run's options"),
        Internal("comfy.model_patcher.create_model_options_clone", "the run's private copy of the guider's model options"),
        Internal("comfy.samplers.CFGGuider#model_options", "run start reads SeaCache's settings from the guider"),
        Internal("comfy.samplers.CFGGuider#model_patcher", "run start chooses the seam for the MODEL the sampler got"),
        Internal("comfy.samplers.CFGGuider#conds", "run start refuses conditioning a first-block gate cannot read "
                 "(set when sampling starts)"),
        Internal("comfy.model_base.BaseModel.memory_required", "shadowed while ComfyUI estimates a run's memory, "
                 "so the residual history is counted"),
        Internal("comfy.model_base.BaseModel.get_dtype", "the stack's dtype: the residual history's size"),
        Internal("comfy.model_management.dtype_size", "bytes per element of the residual history"),
        Internal("comfy.model_sampling.CONST.noise_scaling", "maps a flow model's latent to the gate's convention"),
        Internal("comfy.model_sampling.EPS.noise_scaling", "maps an epsilon/v model's latent to the gate's convention"),
        Internal("comfy.model_sampling.ModelSamplingDiscreteFlow.percent_to_sigma", "start_percent / end_percent"),
        Internal("comfy.model_sampling.ModelSamplingDiscrete.percent_to_sigma", "start_percent / end_percent"),
        Internal("comfy.model_management.InterruptProcessingException", "a cancelled run is reported as interrupted"),
        Internal("comfy_execution.utils.get_executing_context", "the sampler node a run's report belongs to, which "
                 "each Stats node follows"),
        Internal("server.PromptServer", "the live 'reused k / n' line on the canvas (sent only where a server runs)",
                 optional=True),
        Internal("comfy.ldm.wan.model.WanModel", "block-stack seam (else the diffusion-model seam)", optional=True),
        Internal("comfy.ldm.hunyuan_video.model.HunyuanVideo", "block-stack seam", optional=True),
        Internal("comfy.ldm.lightricks.model.LTXVModel", "block-stack seam", optional=True),
        Internal("comfy.ldm.lightricks.av_model.LTXAVModel", "block-stack seam (LTX-2, newer ComfyUI)", optional=True, newer=True),
        Internal("comfy.ldm.flux.model.Flux", "block-stack seam", optional=True),
        Internal("comfy.ldm.qwen_image.model.QwenImageTransformer2DModel", "block-stack seam", optional=True),
    ),
    FIRST_BLOCK: (
        Internal("comfy.ldm.wan.model.repeat_e", "Wan's per-frame modulation of the first block's input"),
        Internal("comfy.ldm.flux.layers.apply_mod", "Flux / HunyuanVideo modulation of the first block's input"),
        Internal("comfy.ldm.common_dit.rms_norm", "LTX-Video's first-block norm"),
        Internal("comfy.model_management.cast_to", "Wan's modulation table in the latent's dtype"),
        Internal("comfy.model_management.in_training", "LTX-Video's fused norm is used only outside training (read "
                 "only where the fused kernel exists)", optional=True, newer=True),
        Internal("comfy.quant_ops.ck", "LTX-Video's fused norm kernel, used where the block uses it", optional=True, newer=True),
    ),
    COSMOS3: (
        Internal("comfy.model_base.BaseModel", "the Cosmos3 model is a ComfyUI model"),
        Internal("comfy.model_base.ModelType.FLOW", "Cosmos3 samples as a flow model"),
        Internal("comfy.supported_models_base.BASE", "the Cosmos3 model config"),
        Internal("comfy.latent_formats.LatentFormat", "the Cosmos3 latent format"),
        Internal("comfy.latent_formats.Wan22", "Cosmos3's latents are normalised as Wan 2.2's"),
        Internal("comfy.conds.CONDRegular", "Cosmos3's text conditioning"),
        Internal("comfy.conds.CONDConstant", "Cosmos3's per-run constants in the conditioning"),
        Internal("comfy.ops.disable_weight_init", "Cosmos3's layers as ComfyUI's operations (fp8, dynamic VRAM)"),
        Internal("comfy.ldm.modules.attention.optimized_attention", "Cosmos3's attention through ComfyUI's kernels"),
        Internal("comfy.model_patcher.ModelPatcher", "the MODEL the Cosmos3 Loader returns"),
        Internal("comfy.model_management.get_torch_device", "where Cosmos3 loads"),
        Internal("comfy.model_management.unet_offload_device", "where Cosmos3 offloads"),
        Internal("comfy.model_management.unet_dtype", "Cosmos3's weight dtype"),
        Internal("comfy.model_management.unet_manual_cast", "Cosmos3's compute dtype"),
        Internal("comfy.model_management.intermediate_device", "where conditioning and decoded outputs live"),
        Internal("comfy.model_management.vae_offload_device", "where the sound VAE offloads"),
        Internal("comfy.model_management.load_models_gpu", "loads the sound VAE"),
        Internal("comfy.utils.load_torch_file", "reads checkpoints"),
        Internal("comfy.utils.common_upscale", "sizes the start image of image-to-video"),
        Internal("comfy.sd.VAE", "the Cosmos3 VAE is ComfyUI's VAE"),
        Internal("comfy.ldm.wan.vae2_2.WanVAE", "the Cosmos3 VAE's network"),
        Internal("comfy.lora.model_lora_keys_unet", "wrapped once to map Cosmos3's LoRA key formats"),
        Internal("comfy.samplers.CFGGuider", "the Cosmos3 CFG Guider subclasses it"),
        Internal("comfy.samplers.sampling_function", "the Cosmos3 CFG Guider's guided step"),
        Internal("comfy.sampler_helpers.prepare_mask", "image-to-video's denoise mask"),
        Internal("node_helpers.conditioning_set_values", "image-to-video adds its latent to the conditioning"),
        Internal("folder_paths.get_folder_paths", "where the Cosmos3 Loader looks for checkpoints"),
        Internal("folder_paths.folder_names_and_paths", "the model folders it lists"),
        Internal("folder_paths.models_dir", "the models/cosmos3 folder"),
        Internal("folder_paths.recursive_search", "checkpoint folders and files"),
        Internal("comfy.nested_tensor.NestedTensor", "video with sound (newer ComfyUI; the sound nodes refuse "
                 "without it)", optional=True, newer=True),
        Internal("comfy.utils.pack_latents", "video with sound in one sampler latent", optional=True, newer=True),
        Internal("comfy.utils.unpack_latents", "video with sound in one sampler latent", optional=True, newer=True),
        Internal("comfy.model_patcher.CoreModelPatcher", "dynamic VRAM's patcher where ComfyUI has it", optional=True, newer=True),
        Internal("comfy.ops.repeat_kv_for_gqa", "attention takes enable_gqa where present", optional=True, newer=True),
    ),
}


def resolve(path: str):
    """The object a class- or module-level path names (the longest importable module, then attributes);
    AttributeError or ImportError when it is gone. A ``#`` path resolves its class."""
    parts = path.split("#")[0].split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(path)


def missing(feature: str) -> tuple[Internal, ...]:
    """The required entries of ``feature`` this ComfyUI lacks (read off the class for ``#`` paths)."""
    gone = []
    for entry in INTERNALS[feature]:
        if entry.optional:
            continue
        try:
            resolve(entry.path)
        except (ImportError, AttributeError):
            gone.append(entry)
    return tuple(gone)


def require(feature: str, node: str) -> None:
    """Refuse (ValueError) before anything runs when this ComfyUI lacks a symbol ``feature`` needs, naming it."""
    gone = missing(feature)
    if gone:
        names = "; ".join(f"{entry.path} ({entry.why})" for entry in gone)
        raise ValueError(f"{node} cannot run on this ComfyUI: it needs {names}, which this ComfyUI does not have "
                         f"(moved or renamed by a ComfyUI update). Update ComfyUI and SeaCache to their newest "
                         f"versions; if both are, report it to SeaCache.")
