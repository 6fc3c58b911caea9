"""Load a Cosmos3 VAE (diffusers ``AutoencoderKLWan``, Wan2.2 layout) as a ComfyUI VAE.

Cosmos3 checkpoints store the VAE as ``vae/config.json`` +
``vae/diffusion_pytorch_model.safetensors`` with diffusers key names
(``encoder.down_blocks.0.resnets.0.norm1.gamma`` ...). ComfyUI ships the same
network as ``comfy.ldm.wan.vae2_2.WanVAE`` but with the key names of the
original Wan release (``encoder.downsamples.0.downsamples.0.residual.0.gamma``
...) and no converter for the diffusers names, so this module provides one.

Public API:

* ``convert_diffusers_wan_vae(sd)``: diffusers -> ComfyUI key names, exact.
* ``wan22_dims_from_state_dict(sd)``: the ``WanVAE`` constructor arguments
  implied by the weight shapes of a converted state dict.
* ``is_standard_wan22(dims)``: whether ``comfy.sd.VAE`` itself builds that.
* ``build_comfy_vae(converted_sd)``: a ``comfy.sd.VAE`` for a converted dict.
* ``load_cosmos3_vae(vae_folder)``: read a folder, convert, build.

ComfyUI modules are imported inside the functions, so importing this file
does not require ComfyUI (the functions do).
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any, Mapping

import torch

from ...cosmos3.config import LATENT_CHANNELS

log = logging.getLogger(__name__)

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "diffusion_pytorch_model.safetensors"

WAN22_PIXEL_CHANNELS = 12  # 3 RGB channels x patch 2 x 2, fixed in WanVAE

# Constructor arguments ComfyUI uses for the Wan2.2 VAE it detects by key
# names (comfy/sd.py, Wan 2.2 branch; dec_dim is WanVAE's default 256).
STANDARD_WAN22_DIMS: dict[str, Any] = {
    "dim": 160,
    "dec_dim": 256,
    "z_dim": LATENT_CHANNELS,
    "dim_mult": [1, 2, 4, 4],
    "num_res_blocks": 2,
    "attn_scales": [],
    "temperal_downsample": [False, True, True],
    "dropout": 0.0,
}

# Keys whose presence/shape identify a diffusers Wan2.2 VAE.
_DIFFUSERS_Z_KEY = "post_quant_conv.weight"
_DIFFUSERS_SIGNATURE_KEYS = (
    "encoder.conv_in.weight",
    "quant_conv.weight",
    "post_quant_conv.weight",
    "decoder.conv_in.weight",
    "decoder.up_blocks.0.resnets.0.norm1.gamma",
)

# Residual block sub-modules: diffusers attribute -> index in ComfyUI's
# ``ResidualBlock.residual`` Sequential (norm, SiLU, conv, norm, SiLU,
# dropout, conv) or the ``shortcut`` attribute.
_RESBLOCK_PARTS = {
    "norm1": "residual.0",
    "conv1": "residual.2",
    "norm2": "residual.3",
    "conv2": "residual.6",
    "conv_shortcut": "shortcut",
}


class Cosmos3VAEError(ValueError):
    """The state dict is not a diffusers Wan2.2-layout VAE."""


def _short_list(keys, limit: int = 12) -> str:
    keys = sorted(keys)
    shown = ", ".join(repr(k) for k in keys[:limit])
    if len(keys) > limit:
        shown += f", ... ({len(keys) - limit} more)"
    return shown


def _shape(t) -> list[int]:
    return [int(s) for s in t.shape]


def _map_resblock(rest: str) -> str | None:
    """``norm1.gamma`` -> ``residual.0.gamma`` etc.; None when not a resblock part."""
    head, _, tail = rest.partition(".")
    part = _RESBLOCK_PARTS.get(head)
    if part is None or not tail:
        return None
    return f"{part}.{tail}"


def _map_mid(prefix: str, rest: str) -> str | None:
    """``mid_block.resnets.i`` -> ``middle.2i``, ``mid_block.attentions.i`` -> ``middle.2i+1``."""
    m = re.fullmatch(r"resnets\.(\d+)\.(.+)", rest)
    if m:
        sub = _map_resblock(m.group(2))
        return None if sub is None else f"{prefix}.middle.{2 * int(m.group(1))}.{sub}"
    m = re.fullmatch(r"attentions\.(\d+)\.((?:norm\.gamma)|(?:to_qkv|proj)\.(?:weight|bias))", rest)
    if m:
        return f"{prefix}.middle.{2 * int(m.group(1)) + 1}.{m.group(2)}"
    return None


def _count_resnets(keys, block_prefix: str) -> dict[int, int]:
    """Number of ``resnets.j`` per block index under ``block_prefix`` (``encoder.down_blocks``)."""
    pat = re.compile(re.escape(block_prefix) + r"\.(\d+)\.resnets\.(\d+)\.")
    counts: dict[int, int] = {}
    for k in keys:
        m = pat.match(k)
        if m:
            i, j = int(m.group(1)), int(m.group(2))
            counts[i] = max(counts.get(i, 0), j + 1)
    return counts


def _rename_key(key: str, down_resnets: Mapping[int, int], up_resnets: Mapping[int, int]) -> str | None:
    """Map one diffusers key to its ComfyUI name, or None if it has no mapping."""
    for src, dst in (("quant_conv.", "conv1."), ("post_quant_conv.", "conv2.")):
        if key.startswith(src) and key[len(src):] in ("weight", "bias"):
            return dst + key[len(src):]

    prefix, _, rest = key.partition(".")
    if prefix not in ("encoder", "decoder") or not rest:
        return None

    m = re.fullmatch(r"conv_in\.(weight|bias)", rest)
    if m:
        return f"{prefix}.conv1.{m.group(1)}"
    if rest == "norm_out.gamma":
        return f"{prefix}.head.0.gamma"
    m = re.fullmatch(r"conv_out\.(weight|bias)", rest)
    if m:
        return f"{prefix}.head.2.{m.group(1)}"
    if rest.startswith("mid_block."):
        return _map_mid(prefix, rest[len("mid_block."):])

    if prefix == "encoder":
        blocks, counts, outer, inner, sampler = "down_blocks", down_resnets, "downsamples", "downsamples", "downsampler"
    else:
        blocks, counts, outer, inner, sampler = "up_blocks", up_resnets, "upsamples", "upsamples", "upsampler"

    m = re.fullmatch(re.escape(blocks) + r"\.(\d+)\.resnets\.(\d+)\.(.+)", rest)
    if m:
        sub = _map_resblock(m.group(3))
        if sub is None:
            return None
        return f"{prefix}.{outer}.{m.group(1)}.{inner}.{m.group(2)}.{sub}"
    m = re.fullmatch(re.escape(blocks) + r"\.(\d+)\.%s\.((?:resample\.1|time_conv)\.(?:weight|bias))" % sampler, rest)
    if m:
        i = int(m.group(1))
        if i not in counts:
            return None
        # The resampler follows the block's residual blocks in ComfyUI's Sequential.
        return f"{prefix}.{outer}.{i}.{inner}.{counts[i]}.{m.group(2)}"
    return None


def _check_wan22_z(sd: Mapping[str, Any], key: str) -> None:
    if key not in sd:
        raise Cosmos3VAEError(
            f"not a Wan2.2-layout VAE: key {key!r} is missing (expected shape "
            f"[{LATENT_CHANNELS}, {LATENT_CHANNELS}, 1, 1, 1]); keys present: {_short_list(sd.keys(), 6)}")
    shape = _shape(sd[key])
    if shape != [LATENT_CHANNELS, LATENT_CHANNELS, 1, 1, 1]:
        raise Cosmos3VAEError(
            f"not a Wan2.2 VAE: {key!r} has shape {shape}, expected "
            f"[{LATENT_CHANNELS}, {LATENT_CHANNELS}, 1, 1, 1] (z_dim {LATENT_CHANNELS}); a z_dim of "
            f"{shape[0]} is another VAE (z_dim 16 is the Wan2.1 VAE)")


def convert_diffusers_wan_vae(sd: Mapping[str, Any]) -> dict[str, Any]:
    """Rename a diffusers ``AutoencoderKLWan`` (Wan2.2, ``is_residual``) state dict to ComfyUI names.

    The result loads into ``comfy.ldm.wan.vae2_2.WanVAE``. The conversion is
    exact: every input key must map, the result must have exactly the keys of
    a ``WanVAE`` with the dimensions read from the weights, with equal shapes.
    Tensors are not copied. Raises ``ValueError`` (``Cosmos3VAEError``) naming
    the offending keys otherwise. ComfyUI 0.3.x ships no converter for these
    names (``comfy.diffusers_convert`` only covers the SD-style VAE).
    """
    keys = list(sd.keys())
    missing_sig = [k for k in _DIFFUSERS_SIGNATURE_KEYS if k not in sd]
    if missing_sig:
        hint = ""
        if "decoder.middle.0.residual.0.gamma" in sd:
            hint = " (these look like original Wan / ComfyUI key names already: pass them to comfy.sd.VAE directly)"
        raise Cosmos3VAEError(
            f"not a diffusers AutoencoderKLWan state dict: missing {_short_list(missing_sig)}{hint}")
    _check_wan22_z(sd, _DIFFUSERS_Z_KEY)

    down_resnets = _count_resnets(keys, "encoder.down_blocks")
    up_resnets = _count_resnets(keys, "decoder.up_blocks")
    out: dict[str, Any] = {}
    unmapped = []
    for k in keys:
        new = _rename_key(k, down_resnets, up_resnets)
        if new is None:
            unmapped.append(k)
        elif new in out:
            raise Cosmos3VAEError(f"two diffusers keys map to {new!r} (second one: {k!r})")
        else:
            out[new] = sd[k]
    if unmapped:
        raise Cosmos3VAEError(
            f"{len(unmapped)} diffusers VAE key(s) have no ComfyUI WanVAE equivalent "
            f"(is this the Wan2.2 layout with is_residual=True?): {_short_list(unmapped)}")

    dims = wan22_dims_from_state_dict(out)
    _validate_against_wanvae(out, dims)
    return out


def wan22_dims_from_state_dict(sd: Mapping[str, Any]) -> dict[str, Any]:
    """``WanVAE`` constructor kwargs implied by a ComfyUI-named Wan2.2 VAE state dict.

    Only tensor *shapes* and key names are read, so meta tensors work.
    """
    for key in ("encoder.conv1.weight", "decoder.conv1.weight", "conv1.weight"):
        if key not in sd:
            raise Cosmos3VAEError(f"not a Wan2.2 VAE state dict (ComfyUI names): {key!r} is missing")
    _check_wan22_z(sd, "conv2.weight")
    z_dim = _shape(sd["conv2.weight"])[0]

    enc_in = _shape(sd["encoder.conv1.weight"])
    if enc_in[1] != WAN22_PIXEL_CHANNELS:
        raise Cosmos3VAEError(
            f"'encoder.conv1.weight' has {enc_in[1]} input channels, expected {WAN22_PIXEL_CHANNELS} "
            "(RGB patchified 2x2, the Wan2.2 layout)")
    dim = enc_in[0]

    level_pat = re.compile(r"encoder\.downsamples\.(\d+)\.downsamples\.(\d+)\.residual\.0\.gamma$")
    levels: dict[int, int] = {}
    for k in sd.keys():
        m = level_pat.match(k)
        if m:
            i, j = int(m.group(1)), int(m.group(2))
            levels[i] = max(levels.get(i, 0), j + 1)
    if not levels or sorted(levels) != list(range(len(levels))):
        raise Cosmos3VAEError(
            "no residual down blocks 'encoder.downsamples.<i>.downsamples.<j>.residual.0.gamma' found: "
            "not the Wan2.2 (is_residual) layout")
    n_levels = len(levels)
    num_res_blocks = levels[0]
    dim_mult = []
    for i in range(n_levels):
        out_ch = _shape(sd[f"encoder.downsamples.{i}.downsamples.0.residual.2.weight"])[0]
        if out_ch % dim:
            raise Cosmos3VAEError(f"encoder level {i} width {out_ch} is not a multiple of the base width {dim}")
        dim_mult.append(out_ch // dim)
    temperal_downsample = [
        f"encoder.downsamples.{i}.downsamples.{levels[i]}.time_conv.weight" in sd
        for i in range(n_levels - 1)
    ]
    dec_width = _shape(sd["decoder.conv1.weight"])[0]
    if dec_width % dim_mult[-1]:
        raise Cosmos3VAEError(f"decoder width {dec_width} is not a multiple of dim_mult[-1]={dim_mult[-1]}")
    return {
        "dim": dim,
        "dec_dim": dec_width // dim_mult[-1],
        "z_dim": z_dim,
        "dim_mult": dim_mult,
        "num_res_blocks": num_res_blocks,
        "attn_scales": [],
        "temperal_downsample": temperal_downsample,
        "dropout": 0.0,
    }


def is_standard_wan22(dims: Mapping[str, Any]) -> bool:
    """True when ``dims`` is exactly what ``comfy.sd.VAE`` builds for a Wan2.2 VAE."""
    return {k: dims.get(k) for k in STANDARD_WAN22_DIMS} == STANDARD_WAN22_DIMS


def _meta_wanvae(dims: Mapping[str, Any]):
    from comfy.ldm.wan.vae2_2 import WanVAE

    with torch.device("meta"):
        return WanVAE(**dims)


def _validate_against_wanvae(sd: Mapping[str, Any], dims: Mapping[str, Any]) -> None:
    expected = {k: list(v.shape) for k, v in _meta_wanvae(dims).state_dict().items()}
    missing = [k for k in expected if k not in sd]
    extra = [k for k in sd if k not in expected]
    wrong = [f"{k}: {_shape(sd[k])} != {expected[k]}" for k in expected if k in sd and _shape(sd[k]) != expected[k]]
    problems = []
    if missing:
        problems.append(f"missing {len(missing)}: {_short_list(missing)}")
    if extra:
        problems.append(f"left over {len(extra)}: {_short_list(extra)}")
    if wrong:
        problems.append(f"shape mismatch {len(wrong)}: {'; '.join(wrong[:8])}")
    if problems:
        raise Cosmos3VAEError(
            f"converted VAE does not match comfy WanVAE({dict(dims)}): " + " | ".join(problems))


def _check_vae_object(vae, model) -> None:
    from comfy.ldm.wan.vae2_2 import WanVAE

    if not isinstance(vae.first_stage_model, WanVAE) or vae.latent_channels != LATENT_CHANNELS:
        raise RuntimeError(
            "comfy.sd.VAE did not build a Wan2.2 WanVAE for a Wan2.2 state dict; this ComfyUI version "
            f"detects VAEs differently (got {type(vae.first_stage_model).__name__}, "
            f"latent_channels={vae.latent_channels})")
    # Nothing may still point at a meta-device module (e.g. an attribute a newer ComfyUI adds).
    for name, value in vars(vae).items():
        if isinstance(value, torch.nn.Module) and value is not model:
            if any(p.is_meta for p in value.parameters()):
                raise RuntimeError(f"comfy.sd.VAE attribute {name!r} still holds the meta-device template model")


def build_comfy_vae(sd: Mapping[str, Any], device=None, dtype=None):
    """A ``comfy.sd.VAE`` for a ComfyUI-named Wan2.2 state dict (output of ``convert_diffusers_wan_vae``).

    Standard size (dims == ``STANDARD_WAN22_DIMS``): ``comfy.sd.VAE(sd=sd)``
    exactly as ComfyUI's own loaders do; ComfyUI detects the Wan2.2 VAE from
    the key names and sets every attribute itself.

    Any other size: ``comfy.sd.VAE`` would build the fixed 705M-parameter
    architecture and fail to load the weights, so the VAE object is built from
    a *meta-device* template instead: a meta ``WanVAE`` with the standard dims
    provides a state dict of standard shapes, ``comfy.sd.VAE(sd=template)`` is
    run under ``torch.device("meta")`` (no memory, no init cost) and so sets
    every Wan2.2 attribute (latent_channels, up/downscale ratios and index
    formulas, process_input/output, memory estimates, working dtypes, device,
    vae_dtype, output_device). Then ``first_stage_model`` is replaced by a real
    ``WanVAE`` with the detected dims and the weights (strict load, assigned
    under a dynamic-VRAM patcher as ComfyUI does), and the patcher is rebuilt
    for it with the class and load/offload devices ComfyUI chose.

    Rejected alternatives: ``VAE.__new__`` + setting attributes by hand, or
    ``VAE(sd={})`` (which returns before device/dtype/patcher are set) both
    copy ComfyUI's attribute list and silently miss attributes later versions
    add; temporarily monkeypatching ``comfy.ldm.wan.vae2_2.WanVAE`` is a
    process-global side effect. The chosen path only depends on the public
    constructor, on ``first_stage_model``/``patcher`` being the model holders,
    and is checked after the swap. The memory estimates stay those of the
    full-size VAE (conservative for a smaller one).
    """
    import comfy.sd

    dims = wan22_dims_from_state_dict(sd)
    if is_standard_wan22(dims):
        vae = comfy.sd.VAE(sd=sd, device=device, dtype=dtype)
        _check_vae_object(vae, vae.first_stage_model)
        return vae

    _validate_against_wanvae(sd, dims)
    template_sd = _meta_wanvae(STANDARD_WAN22_DIMS).state_dict()
    with torch.device("meta"):
        vae = comfy.sd.VAE(sd=template_sd, device=device, dtype=dtype)

    from comfy.ldm.wan.vae2_2 import WanVAE

    from .patcher import is_dynamic

    model = WanVAE(**dims).eval().to(vae.vae_dtype)
    old = vae.patcher
    vae.first_stage_model = model
    vae.patcher = type(old)(model, load_device=old.load_device, offload_device=old.offload_device)
    model.load_state_dict({k: v.to(vae.vae_dtype) for k, v in sd.items()}, strict=True, assign=is_dynamic(vae.patcher))
    _check_vae_object(vae, model)
    return vae


def _resolve_folder(vae_folder: str | os.PathLike) -> str:
    folder = os.fspath(vae_folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"Cosmos3 VAE folder not found: {folder}")
    if not os.path.isfile(os.path.join(folder, CONFIG_NAME)) and os.path.isfile(
            os.path.join(folder, "vae", CONFIG_NAME)):
        folder = os.path.join(folder, "vae")  # a Cosmos3 checkpoint root was given
    for name in (CONFIG_NAME, WEIGHTS_NAME):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"Cosmos3 VAE folder {folder} has no {name} (expected {path}; a diffusers "
                f"AutoencoderKLWan folder has {CONFIG_NAME} + {WEIGHTS_NAME})")
    return folder


def _check_config(config: Mapping[str, Any], folder: str) -> None:
    z = config.get("z_dim")
    if z is not None and int(z) != LATENT_CHANNELS:
        raise Cosmos3VAEError(
            f"{os.path.join(folder, CONFIG_NAME)}: z_dim {z}, expected {LATENT_CHANNELS} (Wan2.2 VAE); "
            f"weights would need {_DIFFUSERS_Z_KEY!r} of shape [{LATENT_CHANNELS}, {LATENT_CHANNELS}, 1, 1, 1]")
    if config.get("is_residual") is False:
        raise Cosmos3VAEError(f"{os.path.join(folder, CONFIG_NAME)}: is_residual is false (Wan2.1 layout), "
                              "expected the Wan2.2 layout (is_residual true)")
    try:
        import comfy.latent_formats

        fmt = comfy.latent_formats.Wan22()
        ref_mean = fmt.latents_mean.flatten().tolist()
        ref_std = fmt.latents_std.flatten().tolist()
    except Exception as e:  # pragma: no cover - only without a usable ComfyUI
        log.debug("cannot compare latents_mean/std with comfy.latent_formats.Wan22: %s", e)
        return
    for name, ref in (("latents_mean", ref_mean), ("latents_std", ref_std)):
        got = config.get(name)
        if got is None:
            continue
        if len(got) != len(ref) or max(abs(float(a) - b) for a, b in zip(got, ref)) > 1e-4:
            log.warning(
                "Cosmos3 VAE config %s differs from ComfyUI's Wan22 latent format; ComfyUI normalises "
                "latents with its own values, so results will differ from the diffusers pipeline (%s)",
                name, os.path.join(folder, CONFIG_NAME))


def load_cosmos3_vae(vae_folder: str | os.PathLike, device=None, dtype=None):
    """Load a diffusers ``AutoencoderKLWan`` folder (Cosmos3 ``vae/``) as a ``comfy.sd.VAE``.

    ``vae_folder`` holds ``config.json`` + ``diffusion_pytorch_model.safetensors``
    (a checkpoint root with a ``vae/`` sub-folder is accepted too). The result
    works with ComfyUI's VAEDecode/VAEEncode nodes; latents in and out are raw
    (un-normalised) Wan2.2 latents, the model's ``latent_format`` (Wan22)
    normalises them. ``device``/``dtype`` are passed to ``comfy.sd.VAE``.

    Raises FileNotFoundError (path named) for a missing folder or file, and
    ValueError for a VAE that is not Wan2.2-shaped (z_dim != 48, other layout).
    """
    import comfy.utils

    folder = _resolve_folder(vae_folder)
    with open(os.path.join(folder, CONFIG_NAME), "r", encoding="utf-8") as f:
        config = json.load(f)
    _check_config(config, folder)
    sd = comfy.utils.load_torch_file(os.path.join(folder, WEIGHTS_NAME), safe_load=True)
    converted = convert_diffusers_wan_vae(sd)
    vae = build_comfy_vae(converted, device=device, dtype=dtype)
    vae.patcher.cached_patcher_init = (load_cosmos3_vae_patcher, (folder, device, dtype))
    return vae


def load_cosmos3_vae_patcher(vae_folder, device=None, dtype=None, disable_dynamic: bool = False):
    """A fresh patcher of the VAE in ``vae_folder``: the ``cached_patcher_init`` factory ComfyUI calls to rebuild a
    VAE for another device (multi-GPU, device-selection nodes). ``disable_dynamic`` is part of that calling
    convention; ``comfy.sd.VAE`` picks its patcher class itself."""
    return load_cosmos3_vae(vae_folder, device=device, dtype=dtype).patcher
