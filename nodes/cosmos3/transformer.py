"""The native Cosmos3 as ComfyUI's diffusion model: ComfyUI's operations and attention, and the wrapper seams
ComfyUI's own models offer (``DIFFUSION_MODEL``) plus one around the generator stack, so nodes can act on the
stack as a whole without patching the model."""

from __future__ import annotations

import functools

import comfy.ops
import comfy.patcher_extension

from ...cosmos3 import Cosmos3Config, Cosmos3Transformer
from .comfy_attention import comfy_attention

GEN_STACK_WRAPPER = "cosmos3_gen_stack"
"""Wrapper type around ``run_gen_stack`` (``ModelPatcher.add_wrapper_with_key``), for nodes that work on the
generator stack as a whole."""


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
