"""The Wan 2.1 natural proxy: ComfyUI's own ``comfy.ldm.wan.model.WanModel`` (T2V) at a tiny size, trained by the
pack's trainer (``python -m benchmarks.train_proxy --data wan_natural``) on the natural proxy's photo videos with 16
latent channels.

It gives the benchmarks a second architecture that runs through ComfyUI itself: the weights are one safetensors
file in ComfyUI's Wan key layout, which ``UNETLoader`` detects as ``WAN21_T2V`` (``in_dim`` 16). The proxy's "text
encoder" is a learned table of one 4096-wide vector per word of ``proxy_natural.WORDS`` (Wan's text width), saved
beside it; a prompt's CONDITIONING is its rows.

Latent spaces: the data (``proxy_natural`` with ``WAN_CHANNELS`` components) is in ComfyUI's *model space*, what
the diffusion model sees after ``Wan21.process_in``. A sampler latent (a LATENT's ``samples``) is
``Wan21.process_out(model-space latent)`` = model-space * Wan's per-channel std + its mean; :func:`to_model_space`
and :func:`from_model_space` map between them, and :func:`decode` turns a sampler latent into the RGB frames the
PCA patch map stands for (exact on the span of its 16 components).

Time: ComfyUI's Wan samples flow (CONST) with multiplier 1000, so the network gets ``t = 1000 * sigma`` and
predicts the velocity noise - x0; :class:`WanProxy` takes the Cosmos3 proxy's call signature so the trainer's
``train``, ``sample`` and ``natural_validity`` run it unchanged. ComfyUI is imported lazily, from
``COMFYUI_PATH``, only when a Wan proxy is built or loaded.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch

from seacache_testing import proxy_natural as natural

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDER = os.path.join(ROOT, "benchmarks", "proxy_wan_natural")
WEIGHTS_NAME = "proxy.safetensors"  # the diffusion model, ComfyUI's Wan key layout (a diffusion_models file)
TEXT_NAME = "text_embedding.safetensors"  # the word table: {"weight": [len(WORDS), TEXT_DIM]}
WAN_CHANNELS = 16  # Wan 2.1's latent channels (what ComfyUI's Wan21 latent format normalises)
LATENT_SHAPE = (WAN_CHANNELS, *natural.LATENT_SHAPE[1:])
TEXT_DIM = 4096  # ComfyUI's Wan detection does not read text_dim; its default
TIMESTEP_MULTIPLIER = 1000.0  # ComfyUI's flow model sampling: the network's t = multiplier * sigma
CFG = 3.0  # the proxy's guidance: at the natural proxy's 4 its samples oversaturate (std 1.12x the data's, ratio 1.23)


@dataclass(frozen=True)
class WanProxyConfig:
    """The proxy's architecture: WanModel's constructor arguments as ComfyUI's Wan detection derives them from the
    weights (num_heads = dim // 128), and the word table's size."""

    dim: int = 128
    num_layers: int = 3
    ffn_dim: int = 256
    vocab_size: int = len(natural.WORDS)

    def unet(self) -> dict:
        """The unet config ComfyUI's ``WAN21_T2V`` builds ``WanModel`` from (what detection reads off the file)."""
        return dict(image_model="wan2.1", model_type="t2v", patch_size=(1, 2, 2), dim=self.dim, ffn_dim=self.ffn_dim,
                    freq_dim=256, text_dim=TEXT_DIM, num_heads=self.dim // 128, num_layers=self.num_layers,
                    window_size=(-1, -1), qk_norm=True, cross_attn_norm=True, eps=1e-6, in_dim=WAN_CHANNELS,
                    out_dim=WAN_CHANNELS)

    def to_dict(self) -> dict:
        """The card's config entry."""
        return {**self.unet(), "vocab_size": self.vocab_size}


def comfyui():
    """ComfyUI's session from ``COMFYUI_PATH`` (CPU mode), with a clear error when the variable is missing."""
    path = os.environ.get("COMFYUI_PATH")
    if not path:
        raise RuntimeError("the Wan proxy runs ComfyUI's own Wan classes: set COMFYUI_PATH to a ComfyUI checkout "
                           "(e.g. COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.train_proxy --data wan_natural)")
    from seacache_testing.comfyui_harness import comfy_session

    return comfy_session(path)


@contextlib.contextmanager
def autograd_kernels(enabled: bool):
    """ComfyUI's training flag while ``enabled``: 0.33's fused rope kernel has no backward, and ComfyUI's own
    trainer switches Wan to the torch rope with ``comfy.model_management.in_training`` (older versions have no
    such kernel and no flag)."""
    import comfy.model_management as mm

    before = getattr(mm, "in_training", None)
    if not enabled or before is None:
        yield
        return
    mm.in_training = True
    try:
        yield
    finally:
        mm.in_training = before


class WanProxy(torch.nn.Module):
    """ComfyUI's WanModel (float32, built as ComfyUI builds Wan 2.1 T2V, with comfy.ops) plus the word table, called
    like the Cosmos3 proxy: ``(x, sigma, tokens, ...) -> velocity``. ``cond_latent``/``cond_mask``, ``fps``, ``sound``
    are ignored (Wan 2.1 T2V has one timestep per item); ``transformer_options`` are passed on (a copy)."""

    def __init__(self, config: WanProxyConfig):
        super().__init__()
        comfyui()
        import comfy.supported_models

        model_config = comfy.supported_models.WAN21_T2V(config.unet())
        model_config.set_inference_dtype(torch.float32, None)
        self.diffusion_model = model_config.get_model({}, device=torch.device("cpu")).diffusion_model
        self.diffusion_model.requires_grad_(True)  # ComfyUI builds inference models without grad
        self.text_embedding = torch.nn.Embedding(config.vocab_size, TEXT_DIM)
        self.reset_parameters(config.dim)

    def reset_parameters(self, dim: int) -> None:
        """Wan's initialisation (comfy.ops leaves weights uninitialised): Xavier-uniform matrices, zero biases, unit
        norm scales, modulation tables N(0, 1/dim), a zero output head; the word table N(0, 1)."""
        with torch.no_grad():
            for name, param in self.diffusion_model.named_parameters():
                if name.endswith("modulation"):
                    param.normal_(0.0, dim ** -0.5)
                elif ".norm" in name:
                    param.fill_(1.0 if name.endswith("weight") else 0.0)
                elif param.ndim >= 2 and not name.startswith("head.head"):
                    torch.nn.init.xavier_uniform_(param.view(param.shape[0], -1))
                else:
                    param.zero_()
            self.text_embedding.weight.normal_(0.0, 1.0)

    def forward(self, x, sigma, tokens, fps=None, cond_latent=None, cond_mask=None, transformer_options=None,
                sound=None):
        """Velocity [B, 16, T, H, W] of model-space latents ``x`` at noise level ``sigma`` [B] for prompts ``tokens``
        [B, L] (ComfyUI's Wan gets ``t = 1000 * sigma`` and the prompts' table rows as its context)."""
        context = self.text_embedding(tokens)
        with autograd_kernels(torch.is_grad_enabled()):
            return self.diffusion_model(x, sigma * TIMESTEP_MULTIPLIER, context,
                                        transformer_options=dict(transformer_options or {}))


# ----------------------------------------------------------------------------------------------- for the benchmark
def load_model(folder: str = FOLDER, weight_dtype: str = "default"):
    """The proxy in ``folder`` as ComfyUI's MODEL, loaded by ComfyUI's own ``UNETLoader`` node with its
    ``weight_dtype``: the folder's parent joins the ``diffusion_models`` search paths and the file is named with its
    folder (``proxy_wan_natural/proxy.safetensors``), since ComfyUI resolves a name to the first search path that
    holds it."""
    ns = comfyui()
    folder = os.path.abspath(folder)
    parent, name = os.path.split(folder)
    unet_name = os.path.join(name, WEIGHTS_NAME)
    ns.folder_paths.add_model_folder_path("diffusion_models", parent)
    found = ns.folder_paths.get_full_path("diffusion_models", unet_name)
    if found is None or os.path.abspath(found) != os.path.join(folder, WEIGHTS_NAME):
        raise FileNotFoundError(f"ComfyUI resolves diffusion model {unet_name!r} to {found}, not to {folder}: "
                                f"train the proxy there or give it a folder name no other diffusion_models path has")
    return ns.run_node("UNETLoader", unet_name=unet_name, weight_dtype=weight_dtype).outputs[0]


def word_table(folder: str = FOLDER) -> torch.Tensor:
    """The trained word table [len(WORDS), 4096] (float32): the proxy's text encoder."""
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, TEXT_NAME))["weight"].float()


def conditioning(label: int | None, table: torch.Tensor, frames: int = natural.FRAMES) -> list:
    """ComfyUI CONDITIONING of class ``label``'s prompt (None: the empty prompt, the CFG negative): the table's rows
    of its tokens, [1, L, 4096]."""
    return [[table[torch.tensor(natural.prompt_tokens(label, frames))][None], {}]]


def to_model_space(samples: torch.Tensor) -> torch.Tensor:
    """What the diffusion model sees of a sampler latent (ComfyUI's ``Wan21.process_in``)."""
    comfyui()
    import comfy.latent_formats

    return comfy.latent_formats.Wan21().process_in(samples)


def from_model_space(latent: torch.Tensor) -> torch.Tensor:
    """The sampler latent (a LATENT's ``samples``) of a model-space latent (ComfyUI's ``Wan21.process_out``)."""
    comfyui()
    import comfy.latent_formats

    return comfy.latent_formats.Wan21().process_out(latent)


def decode(samples: torch.Tensor) -> torch.Tensor:
    """RGB frames [T, 3, 64, 64] of one sampler latent [1, 16, T, 16, 16] (or [16, T, 16, 16]): back to model
    space, then the 16-component PCA patch map inverted (``proxy_natural.decode``)."""
    latent = to_model_space(samples.reshape(1, *samples.shape[-4:]).float())[0]
    return natural.decode(latent.transpose(0, 1))
