"""Cosmos3 as a ComfyUI model: the diffusion-model class, its BaseModel, model config and token conditioning."""

from __future__ import annotations

import functools

import torch

import comfy.conds
import comfy.latent_formats
import comfy.model_base
import comfy.ops
import comfy.sampler_helpers
import comfy.patcher_extension
import comfy.supported_models_base
import comfy.utils
from comfy.ldm.modules.attention import optimized_attention

from ...cosmos3 import TEXT_KV_CACHE_KEY, Cosmos3Config, Cosmos3Transformer, TextKVCache, activation_bytes
from ...cosmos3.audio_vae import AUDIO_VAE_FOLDER, AudioVAEConfig
from ...cosmos3.ops import expand_kv_heads, sdpa_attention
from ...cosmos3.sound import check_sound_rate, check_sound_shape
from .conditioning import video_frames
from ..run_scope import run_scoped_option

GEN_STACK_WRAPPER = "cosmos3_gen_stack"
"""Wrapper type around ``run_gen_stack`` (``ModelPatcher.add_wrapper_with_key``), for nodes that work on the
generator stack as a whole."""


LORA_PREFIXES = ("transformer.", "base_model.model.", "")
"""Prefixes of diffusers/PEFT LoRA keys before a weight's module name (see :meth:`Cosmos3.lora_key_aliases`)."""

COMFY_ATTENTION_HAS_GQA = hasattr(comfy.ops, "repeat_kv_for_gqa")
"""Whether this ComfyUI's attention functions take ``enable_gqa`` (grouped K/V heads without repeating them)."""


def comfy_attention(q, k, v, causal=False, transformer_options=None):
    """Generator attention through ComfyUI's optimized attention, with the call's ``transformer_options`` so
    attention-override nodes apply, and grouped-query K/V passed as they are where ComfyUI supports it (else the
    K/V heads are repeated). The causal text pathway (once per prompt and run) uses torch SDPA's ``is_causal``."""
    if causal:
        return sdpa_attention(q, k, v, causal=True)
    extra = {}
    if k.shape[1] != q.shape[1]:
        if COMFY_ATTENTION_HAS_GQA:
            extra["enable_gqa"] = True
        else:
            k, v = expand_kv_heads(k, q.shape[1]), expand_kv_heads(v, q.shape[1])
    return optimized_attention(q, k, v, heads=q.shape[1], skip_reshape=True,
                               transformer_options=transformer_options or {}, **extra)


class ComfyCosmos3(Cosmos3Transformer):
    """The native Cosmos3 with ComfyUI operations/attention and ComfyUI's wrapper seams (diffusion model, stack)."""

    def __init__(self, image_model=None, dtype=None, device=None, operations=None, **config):
        super().__init__(
            Cosmos3Config.from_dict(config),
            operations=operations or comfy.ops.disable_weight_init,
            attention=comfy_attention,
            device=device,
            dtype=dtype,
        )
        self.dtype = dtype
        # Inference only. Newer ComfyUI puts diffusion models in eval mode itself; older versions leave them in
        # training mode, where ComfyUI's fp8 operations skip their fp8 matrix multiplication.
        self.eval()

    def forward(self, x, timestep, token_ids=None, fps=None, cond_latent=None, cond_mask=None, transformer_options={}, **kwargs):
        """Velocity for ComfyUI's ``BaseModel``; honours ``DIFFUSION_MODEL`` wrappers like ComfyUI's own models.
        An audio-video latent arrives as the list [video, sound] and gives the pair of velocities."""
        if token_ids is None:
            raise ValueError(
                "Cosmos3 got no prompt tokens: its positive and negative inputs must come from "
                "'Cosmos3 Prompt' (or 'Cosmos3 Prompt (Negative)')."
            )
        video, sound = x if isinstance(x, (list, tuple)) else (x, None)
        return comfy.patcher_extension.WrapperExecutor.new_class_executor(
            super().forward,
            self,
            comfy.patcher_extension.get_all_wrappers(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, transformer_options),
        ).execute(video, timestep, token_ids, fps, cond_latent, cond_mask, transformer_options, sound)

    def bind_attention(self, transformer_options):
        """ComfyUI attention carrying this call's ``transformer_options`` (attention overrides, block info)."""
        return functools.partial(comfy_attention, transformer_options=transformer_options)

    def embed_text(self, token_ids, dtype):
        """ComfyUI embeddings cast their (possibly fp8) weight to the compute dtype themselves."""
        return self.embed_tokens(token_ids, out_dtype=dtype).to(dtype)

    def call_gen_stack(self, hidden, inputs):
        """Dispatch ``run_gen_stack`` through the wrappers registered under :data:`GEN_STACK_WRAPPER`."""
        return comfy.patcher_extension.WrapperExecutor.new_class_executor(
            self.run_gen_stack,
            self,
            comfy.patcher_extension.get_all_wrappers(GEN_STACK_WRAPPER, inputs.transformer_options),
        ).execute(hidden, inputs)


class CONDTokens(comfy.conds.CONDRegular):
    """Prompt token ids ``[1, L]``. Prompts of different lengths still batch: shorter ones are padded with -1,
    which the model drops (each item attends only to its own prompt), so cond and uncond share one call whenever
    ComfyUI's memory plan allows it."""

    def can_concat(self, other):
        return self.cond.ndim == other.cond.ndim == 2 and self.cond.device == other.cond.device

    def concat(self, others):
        rows = [self.cond] + [o.cond for o in others]
        width = max(r.shape[1] for r in rows)
        return torch.cat([torch.nn.functional.pad(r, (0, width - r.shape[1]), value=-1) for r in rows])


class Cosmos3(comfy.model_base.BaseModel):
    """Flow-matching BaseModel for Cosmos3 (velocity output, sigma passed through as the timestep)."""

    distilled_schedule = None  # a 4-step checkpoint's DistilledSchedule, set by the loader
    audio_vae_config = None  # the checkpoint's AudioVAEConfig (sound_tokenizer/), set by load_cosmos3_model

    def __init__(self, model_config, device=None):
        super().__init__(model_config, comfy.model_base.ModelType.FLOW, device=device, unet_model=ComfyCosmos3)

    def extra_conds(self, **kwargs):
        """Prompt tokens for the sampled latent's size (the prompt states it) and fps from the prompt node; the I2V
        conditioning latent and per-frame mask."""
        out = {}
        prompt, noise, fps = kwargs.get("cosmos3_prompt"), kwargs.get("noise"), kwargs.get("cosmos3_fps")
        shapes = kwargs.get("latent_shapes")
        if shapes is not None and len(shapes) > 1:  # an audio-video latent, packed by the sampler
            check_av_shapes(self.diffusion_model.config, self.audio_vae_config, shapes, fps)
            out["latent_shapes"] = comfy.conds.CONDConstant(shapes)
        if prompt is not None and noise is not None:
            out["token_ids"] = CONDTokens(prompt.token_ids(video_shape(noise.shape, shapes)))
        if fps is not None:
            out["fps"] = comfy.conds.CONDConstant(float(fps))
        cond_latent = kwargs.get("cosmos3_cond_latent")
        if cond_latent is not None:
            out["cond_latent"] = comfy.conds.CONDRegular(self.process_latent_in(cond_latent))
            out["cond_mask"] = comfy.conds.CONDRegular(kwargs["cosmos3_cond_mask"])
        return out

    def process_latent_in(self, latent):
        """Wan2.2 normalisation of the video; a sound latent stays as it is (diffusers' pipeline samples it raw)."""
        return on_video_stream(latent, getattr(self, "latent_shapes", None), self.latent_format.process_in)

    def process_latent_out(self, latent):
        """Inverse of :meth:`process_latent_in`."""
        return on_video_stream(latent, getattr(self, "latent_shapes", None), self.latent_format.process_out)

    def process_timestep(self, timestep, **kwargs):
        """The network takes sigma itself. With this model's identity mapping that is the timestep already;
        a ModelSamplingSD3-style node patches in a x1000 mapping, which is undone here."""
        return timestep / self.model_sampling.multiplier

    def memory_required(self, input_shape, cond_shapes={}, **kwargs):
        """Peak activation bytes of one call (:func:`cosmos3.model.activation_bytes` over the generator tokens of the
        whole batch; memory-efficient attention is assumed, ComfyUI splits attention when it is not available).
        Newer keywords ComfyUI may pass are accepted and ignored."""
        cfg = self.diffusion_model.config
        tokens = input_shape[0] * item_tokens(cfg, input_shape)
        return activation_bytes(cfg, tokens, self.manual_cast_dtype or self.get_dtype())

    def lora_key_aliases(self) -> dict[str, str]:
        """LoRA keys of diffusers/PEFT trainers for each weight (alias -> ``diffusion_model.<name>.weight``): the
        diffusers Cosmos3 module names equal this model's, so a LoRA trained on it names ``transformer.<name>``
        (diffusers), ``base_model.model.<name>`` (PEFT) or ``<name>``. Read by :mod:`.lora_keys`; ComfyUI's own
        (``diffusion_model.<name>``) and kohya (``lora_unet_<name_with_underscores>``) formats load without it."""
        aliases = {}
        for key in self.state_dict().keys():
            if key.startswith("diffusion_model.") and key.endswith(".weight"):
                name = key[len("diffusion_model.") : -len(".weight")]
                for prefix in LORA_PREFIXES:
                    aliases[prefix + name] = key
        return aliases

    def get_dynamic_vram__units(self):
        """Dynamic VRAM load order: the generator pathway in call order first (the sound projections with the
        input projection); the text pathway, which runs once per prompt and run (its K/V are cached), last."""
        dm = self.diffusion_model
        sound = [getattr(dm, name) for name in ("audio_proj_in", "audio_proj_out") if hasattr(dm, name)]
        generator = [[dm.proj_in, dm.time_embedder, *sound]] + [layer.generator_modules() for layer in dm.layers]
        text = [[dm.embed_tokens]] + [layer.text_modules() for layer in dm.layers]
        return generator + [[dm.norm_moe_gen, dm.proj_out]], text


def item_tokens(config: Cosmos3Config, input_shape) -> int:
    """Generator tokens of one item of a sampler latent ``[B, C, T, H, W]``. A packed audio-video latent
    ``[B, 1, N]`` is counted as N / patch size (its sound frames then count a third of a token each at 64 sound
    channels: 0.7 % of the tokens at 832x480x93 are missed)."""
    if len(input_shape) == 3:
        return -(-input_shape[2] // config.patch_latent_dim)
    return config.token_count(*input_shape[2:5])


def is_packed(shape, latent_shapes) -> bool:
    """Whether a tensor of ``shape`` is the sampler's flat pack [B, 1, N] of several latent streams."""
    return latent_shapes is not None and len(latent_shapes) > 1 and len(shape) == 3


def video_shape(shape, latent_shapes) -> tuple:
    """The video latent's shape [B, C, T, H, W] of a latent (plain or packed audio-video), with its batch."""
    shape = tuple(shape)
    return (shape[0], *tuple(latent_shapes[0])[1:]) if is_packed(shape, latent_shapes) else shape


def on_video_stream(latent, latent_shapes, fn):
    """``fn`` applied to the video stream of a latent, plain, packed or nested; other streams unchanged."""
    if not isinstance(latent, torch.Tensor):  # ComfyUI's NestedTensor
        streams = latent.unbind()
        return type(latent)([fn(streams[0]), *streams[1:]])
    if not is_packed(latent.shape, latent_shapes):
        return fn(latent)
    streams = comfy.utils.unpack_latents(latent, latent_shapes)
    return comfy.utils.pack_latents([fn(streams[0]), *streams[1:]])[0]


def check_av_shapes(config: Cosmos3Config, audio: AudioVAEConfig | None, latent_shapes, fps) -> None:
    """Refuse, at run start, an audio-video latent this model cannot sample: no sound pathway, a sound latent of
    other channels, a checkpoint without an audio VAE or whose transformer and audio VAE disagree on the sound
    rate, or a sound length other than the audio VAE's for the clip's duration at the prompt's fps."""
    if len(latent_shapes) != 2 or len(latent_shapes[0]) != 5 or len(latent_shapes[1]) != 3:
        raise ValueError(f"Cosmos3 samples a video latent plus one sound latent [B, C, T]; got streams {latent_shapes}.")
    sound = tuple(latent_shapes[1])
    check_sound_shape(config, sound)
    if audio is None:
        raise ValueError(f"This Cosmos3 checkpoint ships no {AUDIO_VAE_FOLDER}/ (audio VAE), which sizes and decodes "
                         "its sound: load a Cosmos3 checkpoint trained with sound that ships it.")
    check_sound_rate(config, audio)
    if fps:
        frames = video_frames(latent_shapes[0][2], config.temporal_compression)
        expected = audio.sound_frames(frames, float(fps))
        if sound[2] != expected:
            raise ValueError(
                f"The sound latent has {sound[2]} frames, but {frames} video frames at {float(fps):g} fps take "
                f"{expected}: give Cosmos3 Empty AV Latent (or Add Sound) the fps of Cosmos3 Prompt."
            )


class UnnormalisedVideoLatent(comfy.latent_formats.LatentFormat):
    """The latent format of a checkpoint whose latent is not Wan2.2's 48 channels (a proxy trained on its own
    latent space, such as the benchmarks' quality proxies): video-shaped and passed through unscaled, since
    Wan2.2's per-channel statistics do not apply to it."""

    latent_dimensions = 3

    def __init__(self, channels: int):
        self.latent_channels = channels


class Cosmos3ModelConfig(comfy.supported_models_base.BASE):
    """ComfyUI model config: Wan2.2 latent space, flow sampling with Nano's 720p shift and identity timesteps."""

    unet_config = {"image_model": "cosmos3"}
    unet_extra_config = {}
    sampling_settings = {"shift": 10.0, "multiplier": 1.0}
    latent_format = comfy.latent_formats.Wan22
    supported_inference_dtypes = [torch.bfloat16, torch.float32]

    def __init__(self, config: Cosmos3Config):
        super().__init__({"image_model": "cosmos3", **config.to_dict()})
        if config.latent_channel != self.latent_format.latent_channels:
            self.latent_format = UnnormalisedVideoLatent(config.latent_channel)

    def get_model(self, state_dict, prefix="", device=None):
        return Cosmos3(self, device=device)


class HookAwareTextKVCache(TextKVCache):
    """The run's text K/V cache, its entries keyed also by the weight hooks applied for the call: ComfyUI's hooks
    (a LoRA on one conditioning, keyframed strengths) patch the text pathway's weights in the middle of a run, so
    the same prompt can meet other weights. Without hooks the keys are the plain ones."""

    def __init__(self, base_model):
        super().__init__()
        self.base_model = base_model

    def _with_hooks(self, key: tuple) -> tuple:
        """``key`` plus each applied hook and its strength at this step (what decides the hooked weights)."""
        hooks = getattr(getattr(self.base_model, "current_patcher", None), "current_hooks", None)
        return key if hooks is None else (key, tuple((hook, hook.strength) for hook in hooks.hooks))

    def get(self, key):
        return super().get(self._with_hooks(key))

    def put(self, key, entry):
        super().put(self._with_hooks(key), entry)


def text_kv_outer_sample(executor, *args, **kwargs):
    """Give each sampling run its own text K/V cache (the text pathway then runs once per prompt, weight hooks
    and run)."""
    cache = HookAwareTextKVCache(executor.class_obj.model_patcher.model)
    try:
        with run_scoped_option(executor.class_obj, TEXT_KV_CACHE_KEY, cache):
            return executor(*args, **kwargs)
    finally:
        cache.clear()


def keep_conditioned_outer_sample(executor, noise, latent_image, sampler, sigmas, denoise_mask=None, *args, **kwargs):
    """Return conditioned (noise-masked) regions exactly as given. The model already sees them clean and
    predicts zero velocity there, but multistep samplers such as UniPC end slightly off a kept region; the
    reference pipeline keeps conditioned frames bit-exact, so the final latent takes them from the input."""
    out = executor(noise, latent_image, sampler, sigmas, denoise_mask, *args, **kwargs)
    if denoise_mask is None:
        return out
    mask = comfy.sampler_helpers.prepare_mask(denoise_mask, out.shape, out.device)
    return out * mask + latent_image.to(out) * (1.0 - mask)

