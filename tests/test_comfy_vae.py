"""Cosmos3 (diffusers AutoencoderKLWan, Wan2.2 layout) VAE inside ComfyUI.

Every test here needs a ComfyUI checkout (``COMFYUI_PATH``) and skips
without one. Parity is checked against diffusers' own ``AutoencoderKLWan``
on the same tiny random weights, in fp32 on the CPU.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import torch

from seacache_testing import tiny_vae

RTOL = 1e-4
ATOL = 1e-5


@pytest.fixture(scope="module")
def vae_mod(comfy, import_pack_module):
    return import_pack_module("nodes.cosmos3.vae")


@pytest.fixture(scope="module")
def tiny_mod():
    return tiny_vae


@pytest.fixture(scope="module")
def comfy_vae(comfy, vae_mod, tiny_vae_dir):
    return vae_mod.load_cosmos3_vae(tiny_vae_dir)


@pytest.fixture(scope="module")
def diffusers_vae(tiny_vae_dir):
    from diffusers import AutoencoderKLWan

    return AutoencoderKLWan.from_pretrained(str(tiny_vae_dir), torch_dtype=torch.float32).eval()


def _stats(diffusers_vae):
    mean = torch.tensor(diffusers_vae.config.latents_mean, dtype=torch.float32).view(1, -1, 1, 1, 1)
    std = torch.tensor(diffusers_vae.config.latents_std, dtype=torch.float32).view(1, -1, 1, 1, 1)
    return mean, std


def _normalised_latent(seed=0, shape=(1, 48, 2, 4, 4)):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float32)


def test_loaded_object_is_a_wan22_comfy_vae(comfy, vae_mod, comfy_vae):
    from comfy.ldm.wan.vae2_2 import WanVAE

    vae = comfy_vae
    assert isinstance(vae, comfy.sd.VAE)
    assert isinstance(vae.first_stage_model, WanVAE)
    assert vae.first_stage_model.dim == 8 and vae.first_stage_model.z_dim == 48
    assert vae.first_stage_model.decoder.conv1.weight.shape[0] == 16 * 4  # dec_dim 16 x dim_mult[-1]
    assert vae.patcher.model is vae.first_stage_model
    assert vae.latent_channels == 48 and vae.latent_dim == 3
    assert vae.upscale_index_formula == (4, 16, 16) and vae.downscale_index_formula == (4, 16, 16)
    assert vae.upscale_ratio[0](2) == 5 and vae.downscale_ratio[0](5) == 2
    assert vae.spacial_compression_decode() == 16 and vae.spacial_compression_encode() == 16
    assert vae.temporal_compression_decode() == 4
    assert vae.vae_dtype == torch.float32 and vae.device == torch.device("cpu")
    assert vae.memory_used_decode((1, 48, 2, 4, 4), torch.float32) > 0
    assert vae.memory_used_encode((1, 3, 5, 64, 64), torch.float32) > 0
    assert not any(p.is_meta for p in vae.first_stage_model.parameters())
    assert vae.patcher.model_size() == sum(p.numel() * 4 for p in vae.first_stage_model.parameters())


def test_decode_matches_diffusers(comfy, comfy_vae, diffusers_vae):
    z = _normalised_latent(seed=0)
    mean, std = _stats(diffusers_vae)
    # ComfyUI de-normalises with its own Wan22 latent format; the pipeline with the config values.
    raw_comfy = comfy.latent_formats.Wan22().process_out(z.clone())
    raw_pipe = z * std + mean
    torch.testing.assert_close(raw_comfy, raw_pipe, rtol=0, atol=1e-6)

    with torch.inference_mode():
        got = comfy_vae.decode(raw_comfy)  # [B, T, H, W, C] in [0, 1]
        ref = diffusers_vae.decode(raw_pipe).sample  # [B, C, T, H, W] in [-1, 1] (clamped)
    assert got.shape == (1, 5, 64, 64, 3)
    assert ref.abs().max() < 1.0, "tiny VAE output saturates; the clamp would hide differences"
    ref01 = ((ref + 1.0) / 2.0).clamp(0.0, 1.0).permute(0, 2, 3, 4, 1)
    torch.testing.assert_close(got, ref01, rtol=RTOL, atol=ATOL)

    # Unclamped network output too (first_stage_model.decode is the raw [-1, 1] video).
    with torch.inference_mode():
        raw_out = comfy_vae.first_stage_model.decode(raw_comfy)
    torch.testing.assert_close(raw_out, ref, rtol=RTOL, atol=ATOL)


def test_vaedecode_node_uses_it(comfy, comfy_vae):
    z = _normalised_latent(seed=1)
    raw = comfy.latent_formats.Wan22().process_out(z)
    res = comfy.run_node("VAEDecode", vae=comfy_vae, samples={"samples": raw})
    (images,) = res.outputs
    assert images.shape == (5, 64, 64, 3)  # video frames flattened into the image batch
    with torch.inference_mode():
        direct = comfy_vae.decode(raw).reshape(-1, 64, 64, 3)
    torch.testing.assert_close(images, direct, rtol=0, atol=0)


def test_encode_matches_diffusers(comfy, comfy_vae, diffusers_vae):
    images = torch.rand((5, 64, 64, 3), generator=torch.Generator().manual_seed(2))  # ComfyUI IMAGE batch
    mean, std = _stats(diffusers_vae)
    with torch.inference_mode():
        raw_mu = comfy_vae.encode(images)  # frames -> one video [1, 48, T', H/16, W/16]
        x = (images * 2.0 - 1.0).permute(3, 0, 1, 2).unsqueeze(0)  # [1, 3, T, H, W] in [-1, 1]
        ref_mu = diffusers_vae.encode(x).latent_dist.mean
    assert raw_mu.shape == (1, 48, 2, 4, 4)
    torch.testing.assert_close(raw_mu, ref_mu, rtol=RTOL, atol=ATOL)
    got = comfy.latent_formats.Wan22().process_in(raw_mu)
    ref = (ref_mu - mean) / std
    torch.testing.assert_close(got, ref, rtol=RTOL, atol=1e-4)

    res = comfy.run_node("VAEEncode", vae=comfy_vae, pixels=images)
    (latent,) = res.outputs
    torch.testing.assert_close(latent["samples"], raw_mu, rtol=0, atol=0)


def test_conversion_is_exact(comfy, vae_mod, tiny_vae_dir):
    from safetensors.torch import load_file

    sd = load_file(str(tiny_vae_dir / "diffusion_pytorch_model.safetensors"))
    out = vae_mod.convert_diffusers_wan_vae(sd)
    assert len(out) == len(sd)
    dims = vae_mod.wan22_dims_from_state_dict(out)
    assert dims == {"dim": 8, "dec_dim": 16, "z_dim": 48, "dim_mult": [1, 2, 4, 4], "num_res_blocks": 2,
                    "attn_scales": [], "temperal_downsample": [False, True, True], "dropout": 0.0}
    assert not vae_mod.is_standard_wan22(dims)
    # Spot checks of the naming scheme.
    assert out["encoder.conv1.weight"] is sd["encoder.conv_in.weight"]
    assert out["conv2.weight"] is sd["post_quant_conv.weight"]
    assert out["encoder.downsamples.1.downsamples.2.time_conv.weight"] is sd["encoder.down_blocks.1.downsampler.time_conv.weight"]
    assert out["decoder.upsamples.0.upsamples.3.resample.1.weight"] is sd["decoder.up_blocks.0.upsampler.resample.1.weight"]
    assert out["decoder.middle.1.to_qkv.weight"] is sd["decoder.mid_block.attentions.0.to_qkv.weight"]
    assert out["encoder.downsamples.1.downsamples.0.shortcut.weight"] is sd["encoder.down_blocks.1.resnets.0.conv_shortcut.weight"]


def test_conversion_rejects_unknown_keys(comfy, vae_mod, tiny_vae_dir):
    from safetensors.torch import load_file

    sd = load_file(str(tiny_vae_dir / "diffusion_pytorch_model.safetensors"))
    sd["encoder.down_blocks.0.extra_layer.weight"] = torch.zeros(1)
    with pytest.raises(ValueError, match="encoder.down_blocks.0.extra_layer.weight"):
        vae_mod.convert_diffusers_wan_vae(sd)

    sd = load_file(str(tiny_vae_dir / "diffusion_pytorch_model.safetensors"))
    del sd["decoder.up_blocks.1.resnets.2.conv2.bias"]
    with pytest.raises(ValueError, match=r"decoder\.upsamples\.1\.upsamples\.2\.residual\.6\.bias"):
        vae_mod.convert_diffusers_wan_vae(sd)


def test_missing_folder_and_files(comfy, vae_mod, tiny_vae_dir, tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        vae_mod.load_cosmos3_vae(missing)

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="config.json") as ei:
        vae_mod.load_cosmos3_vae(empty)
    assert str(empty) in str(ei.value)

    only_cfg = tmp_path / "only_cfg"
    only_cfg.mkdir()
    shutil.copy(tiny_vae_dir / "config.json", only_cfg / "config.json")
    with pytest.raises(FileNotFoundError, match="diffusion_pytorch_model.safetensors") as ei:
        vae_mod.load_cosmos3_vae(only_cfg)
    assert str(only_cfg) in str(ei.value)


def test_checkpoint_root_with_vae_subfolder(comfy, vae_mod, tiny_vae_dir, tmp_path):
    shutil.copytree(tiny_vae_dir, tmp_path / "vae")
    vae = vae_mod.load_cosmos3_vae(tmp_path)
    assert vae.latent_channels == 48


def test_wan21_vae_is_rejected(comfy, vae_mod, tmp_path):
    from diffusers import AutoencoderKLWan

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        AutoencoderKLWan(base_dim=8, z_dim=16).save_pretrained(str(tmp_path))  # Wan2.1 layout, z_dim 16
    with pytest.raises(ValueError, match=r"z_dim 16.*expected 48.*post_quant_conv\.weight"):
        vae_mod.load_cosmos3_vae(tmp_path)

    from safetensors.torch import load_file

    sd = load_file(str(tmp_path / "diffusion_pytorch_model.safetensors"))
    with pytest.raises(ValueError, match=r"post_quant_conv\.weight.*\[16, 16, 1, 1, 1\].*\[48, 48, 1, 1, 1\]"):
        vae_mod.convert_diffusers_wan_vae(sd)


def test_warns_when_latent_stats_differ(comfy, vae_mod, tiny_vae_dir, tmp_path, caplog):
    folder = tmp_path / "vae"
    shutil.copytree(tiny_vae_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["latents_std"] = [1.0] * 48
    (folder / "config.json").write_text(json.dumps(cfg))
    with caplog.at_level(logging.WARNING):
        vae_mod.load_cosmos3_vae(folder)
    assert any("latents_std" in r.getMessage() for r in caplog.records)
    assert not any("latents_mean" in r.getMessage() for r in caplog.records)


def test_no_warning_for_matching_stats(comfy, vae_mod, tiny_vae_dir, caplog):
    with caplog.at_level(logging.WARNING):
        vae_mod.load_cosmos3_vae(tiny_vae_dir)
    assert not any("latents_" in r.getMessage() for r in caplog.records)


def test_standard_shapes_take_comfys_own_path(comfy, vae_mod, tiny_mod, monkeypatch):
    """A full-size state dict goes to comfy.sd.VAE(sd=converted) untouched; nothing 705M is allocated."""
    from diffusers import AutoencoderKLWan

    with torch.device("meta"):
        big = AutoencoderKLWan(**tiny_mod.WAN22_DIFFUSERS_CONFIG)
    sd = big.state_dict()
    assert all(t.is_meta for t in sd.values())
    assert 700e6 < sum(t.numel() for t in sd.values()) < 710e6  # the real 705M-parameter layout

    converted = vae_mod.convert_diffusers_wan_vae(sd)
    dims = vae_mod.wan22_dims_from_state_dict(converted)
    assert dims == vae_mod.STANDARD_WAN22_DIMS and vae_mod.is_standard_wan22(dims)
    # ComfyUI's own Wan2.2 detection keys are present after conversion.
    assert "decoder.middle.0.residual.0.gamma" in converted
    assert "decoder.upsamples.0.upsamples.0.residual.2.weight" in converted

    calls = []

    class _Stop(Exception):
        pass

    def fake_vae(sd=None, device=None, config=None, dtype=None, metadata=None):
        calls.append(sd)
        raise _Stop

    monkeypatch.setattr(comfy.sd, "VAE", fake_vae)
    with pytest.raises(_Stop):
        vae_mod.build_comfy_vae(converted)
    assert len(calls) == 1 and calls[0] is converted


def test_full_size_random_vae_loads_with_the_real_dimensions_and_decodes(comfy, vae_mod, tmp_path):
    """The GPU check's VAE (``tiny_vae.write_full_size_vae``): the real Wan2.2 widths, loaded by the pack's loader,
    decodes a latent to finite pixels, so the GPU stage decodes at the real cost."""
    folder = tiny_vae.write_full_size_vae(tmp_path / "vae")
    vae = vae_mod.load_cosmos3_vae(folder)
    model = vae.first_stage_model
    assert model.dim == 160 and model.z_dim == 48
    assert model.decoder.conv1.weight.shape[0] == 256 * 4  # the real decoder base width x dim_mult[-1]
    assert 700e6 < sum(p.numel() for p in model.parameters()) < 710e6
    pixels = vae.decode(_normalised_latent(shape=(1, 48, 1, 2, 2)))
    assert pixels.shape[-1] == 3 and pixels.shape[-3:-1] == (32, 32) and torch.isfinite(pixels).all()
