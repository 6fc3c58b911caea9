"""Helpers for integration tests: the tiny Cosmos3 checkpoint loaded through this pack's nodes in a real
ComfyUI, and small T2V/I2V runs through ComfyUI's own sampler nodes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from types import SimpleNamespace

import torch

from . import comfyui_harness
from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

SIZE = dict(width=64, height=64, length=9)
TEXT_DEFAULTS = dict(fps=24.0, resolution_template=True, duration_template=True, use_system_prompt=True, system_prompt="")
APPLY_DEFAULTS = dict(threshold=0.25, residual_order="1", max_consecutive=2, warmup_steps=1, end_steps=1,
                      start_percent=0.0, end_percent=1.0, filter_exponent="auto", residual_storage="compute device",
                      gate="sea")


@dataclass
class Tiny:
    """A loaded tiny checkpoint: ComfyUI handles plus the loader node's outputs."""

    ns: SimpleNamespace
    pack: object
    name: str
    model: object
    vae: object
    text: object
    audio_vae: object = None

    def encode(self, prompt="a red fox running through snow", negative=False):
        node = "SeaCacheCosmos3PromptEncodeNegative" if negative else "SeaCacheCosmos3PromptEncode"
        return self.ns.run_node(node, cosmos3_text=self.text, prompt=prompt, **TEXT_DEFAULTS).outputs[0]

    def empty(self, batch_size=1, **size):
        return self.ns.run_node("SeaCacheCosmos3EmptyLatentVideo", **{**SIZE, **size}, batch_size=batch_size).outputs[0]

    def seacache(self, model=None, node_id="7", **overrides):
        return self.ns.run_node("SeaCacheApply", hidden={"UNIQUE_ID": node_id}, model=self.model if model is None else model, **{**APPLY_DEFAULTS, **overrides}).outputs[0]

    def sample(self, model, positive=None, negative=None, latent=None, steps=10, sampler="uni_pc_bh2", seed=3, cfg=6.0, shift=10.0):
        positive = positive if positive is not None else self.encode()
        negative = negative if negative is not None else self.encode("", negative=True)
        latent = latent if latent is not None else self.empty()
        run = self.ns.run_node
        guider = run("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg).outputs[0]
        sampler_obj = run("KSamplerSelect", sampler_name=sampler).outputs[0]
        noise = run("RandomNoise", noise_seed=seed).outputs[0]
        sigmas = run("SeaCacheCosmos3Scheduler", steps=steps, shift=shift, denoise=1.0).outputs[0]
        out = run("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler_obj, sigmas=sigmas, latent_image=latent)
        return out.outputs[0]["samples"]

    def stats(self, model, samples):
        return self.ns.run_node("SeaCacheStats", samples={"samples": samples}, model=model)


def load_tiny(comfy, tmp_path_factory, preset="tiny") -> Tiny:
    """Write the tiny checkpoint of ``preset`` under a fresh diffusion_models folder and load it with the Cosmos3
    Loader (the pack is loaded through ComfyUI's loader once per session)."""
    name = "cosmos3-" + preset
    root = tmp_path_factory.mktemp("diffusion_models")
    make_tiny_checkpoint(str(root / name), preset=preset)
    comfy.folder_paths.add_model_folder_path("diffusion_models", str(root), is_default=True)
    loaded = sys.modules.get(str(comfyui_harness.PACK_ROOT).replace(".", "_x_"))
    pack = loaded if loaded is not None else comfyui_harness.load_pack_with_comfyui_loader(comfy)
    model, vae, text, audio_vae = comfy.run_node("SeaCacheCosmos3Loader", checkpoint=name, weight_dtype="default").outputs
    return Tiny(comfy, pack, name, model, vae, text, audio_vae)


class LayerCalls:
    """Counts generator-layer and text-layer executions of a Cosmos3 diffusion model (patched per instance)."""

    def __init__(self, diffusion_model):
        self.gen = self.text = 0
        self.layers = list(diffusion_model.layers)
        for layer in self.layers:
            layer.gen_step = self._count(layer.gen_step, "gen")
            layer.text_step = self._count(layer.text_step, "text")

    def _count(self, fn, kind):
        def counted(*args, **kwargs):
            setattr(self, kind, getattr(self, kind) + 1)
            return fn(*args, **kwargs)
        return counted

    def close(self):
        for layer in self.layers:
            del layer.gen_step, layer.text_step


def prompt_ids(conditioning, size=SIZE) -> list[int]:
    """The token ids a Cosmos3 prompt conditioning gets for a latent of the given pixel size."""
    shape = [1, 48, (size["length"] - 1) // 4 + 1, size["height"] // 16, size["width"] // 16]
    return conditioning[0][1]["cosmos3_prompt"].token_ids(shape)[0].tolist()


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max()).item()
