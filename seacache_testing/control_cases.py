"""ControlNets and block model patches on tiny core models, built from ComfyUI's own classes (random weights), for
the composition tests and the error table: each case turns a plain MODEL and its conditioning into the same graph
with the control attached, as a user's nodes would.

- Flux: ``ControlNetFlux`` (XLabs-style image hint) through ``comfy.controlnet.ControlNet`` and ControlNetApplyAdvanced.
- Qwen-Image: ``QwenImageControlNetModel`` (InstantX-style latent hint) the same way.
- HunyuanVideo: ComfyUI has no ControlNet for it; ``ControlNet`` runs a small module returning a residual per
  double and single block through the model's ``control`` argument, as a ControlNet would.
- Qwen-Image DiffSynth: core ``QwenImageDiffsynthControlnet`` (a ``patches["double_block"]`` model patch) with a
  ``QwenImageBlockWiseControlNet`` and a stand-in VAE (its encode is a fixed projection).
- Wan: a ``patches["double_block"]`` patch adding a residual after each block; Wan VACE (``VaceWanModel``, control
  frames in the conditioning) and Wan Fun control (control latent concatenated to the input).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from . import tiny_comfy_models

CPU = torch.device("cpu")


@dataclass(frozen=True)
class Case:
    """``attach(ns, model, spec, positive, negative) -> (model, positive, negative)`` with the control in place;
    ``patch_runs``: where the case counts its block-patch executions (None when it has none)."""

    name: str
    model: str
    attach: Callable
    patch_runs: dict | None = None


def _controlnet(ns, control_model, positive, negative, image, **kwargs):
    """``control_model`` as a ComfyUI ControlNet applied to both conditionings by ControlNetApplyAdvanced."""
    import comfy.controlnet

    tiny_comfy_models.randomize(control_model, seed=7)
    control = comfy.controlnet.ControlNet(control_model, load_device=CPU, **kwargs)
    return ns.run_node("ControlNetApplyAdvanced", positive=positive, negative=negative, control_net=control, image=image,
                       strength=1.0, start_percent=0.0, end_percent=1.0).outputs


def _image(shape, seed=5) -> torch.Tensor:
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed))


def flux_controlnet(ns, model, spec, positive, negative):
    import comfy.ldm.flux.controlnet
    import comfy.ops

    params = tiny_comfy_models.accepted_arguments(spec.unet, comfy.ldm.flux.controlnet.ControlNetFlux.__mro__[1])
    net = comfy.ldm.flux.controlnet.ControlNetFlux(operations=comfy.ops.disable_weight_init, device=CPU, dtype=torch.float32, **params)
    _, h, w = spec.latent
    pos, neg = _controlnet(ns, net, positive, negative, _image((1, h * 8, w * 8, 3)), extra_conds=["y", "guidance"])
    return model, pos, neg


def qwen_controlnet(ns, model, spec, positive, negative):
    import comfy.ldm.qwen_image.controlnet
    import comfy.ops

    params = tiny_comfy_models.accepted_arguments(spec.unet, comfy.ldm.qwen_image.controlnet.QwenImageControlNetModel.__mro__[1])
    net = comfy.ldm.qwen_image.controlnet.QwenImageControlNetModel(operations=comfy.ops.disable_weight_init, device=CPU, dtype=torch.float32, **params)
    c, h, w = spec.latent
    hint = _image((1, 1, h, w, c)) * 2 - 1  # a one-frame latent hint (what the VAE gives), channels last like an IMAGE
    pos, neg = _controlnet(ns, net, positive, negative, hint, compression_ratio=1, extra_conds=[])
    return model, pos, neg


class BlockResiduals(torch.nn.Module):
    """A ControlNet-shaped module for HunyuanVideo: per block, a residual from the noisy latent and the hint tokens."""

    def __init__(self, channels: int, hidden: int, double: int, single: int):
        super().__init__()
        self.latent_in = torch.nn.Linear(channels * 4, hidden)
        self.hint_in = torch.nn.Linear(channels * 4, hidden)
        self.double_blocks = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(double))
        self.single_blocks = torch.nn.ModuleList(torch.nn.Linear(hidden, hidden) for _ in range(single))
        self.dtype = torch.float32

    @staticmethod
    def _tokens(x: torch.Tensor) -> torch.Tensor:
        """[B, C, T, H, W] (or [B, C, H, W]) -> [B, T*H/2*W/2, C*4], patch (1, 2, 2)."""
        x = x if x.ndim == 5 else x.unsqueeze(2)
        b, c, t, h, w = x.shape
        x = x.reshape(b, c, t, h // 2, 2, w // 2, 2).permute(0, 2, 3, 5, 1, 4, 6)
        return x.reshape(b, t * (h // 2) * (w // 2), c * 4)

    def forward(self, x, hint, timesteps, context, **kwargs):
        tokens = self._tokens(x)
        hint_tokens = self._tokens(hint).repeat(1, tokens.shape[1] // self._tokens(hint).shape[1], 1)
        base = torch.tanh(self.latent_in(tokens) + self.hint_in(hint_tokens))
        return {"input": [0.5 * layer(base) for layer in self.double_blocks], "output": [0.5 * layer(base) for layer in self.single_blocks]}


def hunyuan_controlnet(ns, model, spec, positive, negative):
    c, _, h, w = spec.latent
    net = BlockResiduals(c, spec.unet["hidden_size"], spec.unet["depth"], spec.unet["depth_single_blocks"])
    pos, neg = _controlnet(ns, net, positive, negative, _image((1, h, w, c)), compression_ratio=1, extra_conds=[])
    return model, pos, neg


class StandInVAE:
    """What the DiffSynth patch needs of a VAE: ``encode`` (a fixed projection of 8x8-pooled pixels to 16 channels)
    and the spatial compression."""

    def __init__(self, seed=9):
        self.projection = torch.randn(16, 3, generator=torch.Generator().manual_seed(seed))

    def encode(self, image: torch.Tensor) -> torch.Tensor:
        pooled = torch.nn.functional.avg_pool2d(image[..., :3].movedim(-1, 1), 8)
        return torch.einsum("oc,bchw->bohw", self.projection, pooled).unsqueeze(2)  # [B, 16, 1, H/8, W/8] like Wan's

    def spacial_compression_encode(self) -> int:
        return 8


def qwen_diffsynth_patch(ns, model, spec, positive, negative):
    import comfy.model_patcher
    import comfy.ops

    ns.load_extra_nodes("nodes_model_patch.py")
    module = __import__("comfy_extras.nodes_model_patch", fromlist=["QwenImageBlockWiseControlNet"])
    dim = spec.unet["attention_head_dim"] * spec.unet["num_attention_heads"]
    net = module.QwenImageBlockWiseControlNet(num_layers=spec.unet["num_layers"], in_dim=spec.unet["in_channels"], dim=dim,
                                              device=CPU, dtype=torch.float32, operations=comfy.ops.manual_cast)
    tiny_comfy_models.randomize(net, seed=8)
    patch = comfy.model_patcher.ModelPatcher(net, load_device=CPU, offload_device=CPU)
    _, h, w = spec.latent
    patched = ns.run_node("QwenImageDiffsynthControlnet", model=model, model_patch=patch, vae=StandInVAE(),
                          image=_image((1, h * 8, w * 8, 3)), strength=1.0).outputs[0]
    return _counting_double_block_patches(patched, QWEN_DIFFSYNTH_RUNS), positive, negative


class ResidualAfterBlock:
    """A ``patches["double_block"]`` model patch: adds ``0.1 * tanh(img @ W_i)`` after block i (a new tensor)."""

    def __init__(self, dim: int, blocks: int, seed=6):
        generator = torch.Generator().manual_seed(seed)
        self.weights = [torch.randn(dim, dim, generator=generator) * 0.1 for _ in range(blocks)]

    def __call__(self, args: dict) -> dict:
        img = args["img"]
        return {**args, "img": img + 0.1 * torch.tanh(img @ self.weights[args["block_index"]].to(img))}


def wan_double_block_patch(ns, model, spec, positive, negative):
    patched = model.clone()
    patched.set_model_double_block_patch(ResidualAfterBlock(spec.unet["dim"], spec.unet["num_layers"]))
    return _counting_double_block_patches(patched, WAN_PATCH_RUNS), positive, negative


def _counting_double_block_patches(model, counter: dict):
    """The model with each ``double_block`` patch wrapped to count its runs per block index into ``counter``."""
    patches = model.model_options["transformer_options"]["patches"]

    def counted(patch):
        def run(args):
            counter[args["block_index"]] = counter.get(args["block_index"], 0) + 1
            return patch(args)
        return run

    patches["double_block"] = [counted(p) for p in patches["double_block"]]
    return model


def _with_cond(conditioning, **extra):
    return [[c, {**d, **extra}] for c, d in conditioning]


def wan_vace(ns, model, spec, positive, negative):
    c, t, h, w = spec.latent
    frames = [_image((1, 2 * c, t, h, w)) * 2 - 1]
    mask = [torch.ones(1, 64, t, h, w)]
    extra = dict(vace_frames=frames, vace_mask=mask, vace_strength=[1.0])
    return model, _with_cond(positive, **extra), _with_cond(negative, **extra)


def wan_fun_control(ns, model, spec, positive, negative):
    c, t, h, w = spec.latent
    control = _image((1, 2 * c, t, h, w)) * 2 - 1  # reference + control latents, concatenated to the input
    return model, _with_cond(positive, concat_latent_image=control), _with_cond(negative, concat_latent_image=control)


QWEN_DIFFSYNTH_RUNS: dict = {}
WAN_PATCH_RUNS: dict = {}

CASES = [
    Case("Flux ControlNet", "flux", flux_controlnet),
    Case("Qwen-Image ControlNet", "qwen_image", qwen_controlnet),
    Case("HunyuanVideo control residuals", "hunyuan_video", hunyuan_controlnet),
    Case("Qwen-Image DiffSynth patch", "qwen_image", qwen_diffsynth_patch, QWEN_DIFFSYNTH_RUNS),
    Case("Wan double_block patch", "wan21_t2v", wan_double_block_patch, WAN_PATCH_RUNS),
    Case("Wan VACE", "wan21_vace", wan_vace),
    Case("Wan Fun control", "wan21_fun_control", wan_fun_control),
]
