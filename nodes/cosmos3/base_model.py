"""Cosmos3 as a ComfyUI ``BaseModel``: what ComfyUI's samplers and model management ask of a model (its
conditioning, latent normalisation, timestep, memory estimate, LoRA keys and dynamic VRAM load order), answered
for the native Cosmos3 diffusion model."""

from __future__ import annotations

import comfy.conds
import comfy.model_base

from ...cosmos3 import activation_bytes
from .av_checks import check_av_shapes
from .cond_tokens import CONDTokens
from .transformer import ComfyCosmos3
from .latent_streams import item_tokens, on_video_stream, video_shape
from .lora_keys import diffusers_lora_aliases


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
        """LoRA keys of diffusers/PEFT trainers for each weight (alias -> ``diffusion_model.<name>.weight``, see
        :func:`.lora_keys.diffusers_lora_aliases`); read by the key-map hook of :mod:`.lora_keys`."""
        return diffusers_lora_aliases(self.state_dict().keys())

    def get_dynamic_vram__units(self):
        """Dynamic VRAM load order: the generator pathway in call order first (the sound projections with the
        input projection); the text pathway, which runs once per prompt and run (its K/V are cached), last."""
        dm = self.diffusion_model
        sound = [getattr(dm, name) for name in ("audio_proj_in", "audio_proj_out") if hasattr(dm, name)]
        generator = [[dm.proj_in, dm.time_embedder, *sound]] + [layer.generator_modules() for layer in dm.layers]
        text = [[dm.embed_tokens]] + [layer.text_modules() for layer in dm.layers]
        return generator + [[dm.norm_moe_gen, dm.proj_out]], text
