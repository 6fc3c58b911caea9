"""Cosmos3 Loader in a real ComfyUI (needs COMFYUI_PATH): checkpoints where users keep them (models/diffusion_models
and models/cosmos3), both shard namings, the tokenizer in text_tokenizer/ or at the root, checkpoints without
assets/, 4-step schedules, and errors that name the path and what is missing."""

import json
import shutil
from pathlib import Path

import pytest
import torch

EDGE = "community/Cosmos3-Edge-loader-test"  # models/cosmos3, model* shards, tokenizer at the root, relu2
SUPER = "Cosmos3-Super-loader-test"  # models/diffusion_models, diffusion_pytorch_model* shards, no assets/
FOUR_STEP = "Cosmos3-I2V-4Step-loader-test"  # models/cosmos3, distilled sigmas


@pytest.fixture(scope="module")
def folders(comfy, tmp_path_factory):
    """A diffusion_models and a cosmos3 folder registered with ComfyUI, holding family checkpoints."""
    from seacache_testing import comfyui_harness
    from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

    if "SeaCacheCosmos3Loader" not in comfy.nodes.NODE_CLASS_MAPPINGS:
        comfyui_harness.load_pack_with_comfyui_loader(comfy)
    diffusion = tmp_path_factory.mktemp("loader_diffusion_models")
    cosmos3 = tmp_path_factory.mktemp("loader_cosmos3")
    make_tiny_checkpoint(str(cosmos3 / EDGE), "tiny-edge")
    make_tiny_checkpoint(str(diffusion / SUPER), "tiny-super")
    make_tiny_checkpoint(str(cosmos3 / FOUR_STEP), "tiny-i2v-4step")
    comfy.folder_paths.add_model_folder_path("diffusion_models", str(diffusion))
    comfy.folder_paths.add_model_folder_path("cosmos3", str(cosmos3))  # as extra_model_paths.yaml would
    return {"diffusion_models": diffusion, "cosmos3": cosmos3}


def load(comfy, checkpoint):
    return comfy.run_node("SeaCacheCosmos3Loader", checkpoint=checkpoint, weight_dtype="default").outputs


def loader_module(comfy):
    import sys

    return sys.modules[comfy.nodes.NODE_CLASS_MAPPINGS["SeaCacheCosmos3Loader"].__module__]


def sample_two_steps(comfy, model, text):
    run = comfy.run_node
    encode = dict(fps=24.0, resolution_template=True, duration_template=True, use_system_prompt=True, system_prompt="")
    pos = run("SeaCacheCosmos3PromptEncode", cosmos3_text=text, prompt="a lighthouse at dusk", **encode).outputs[0]
    neg = run("SeaCacheCosmos3PromptEncodeNegative", cosmos3_text=text, prompt="", **encode).outputs[0]
    latent = run("SeaCacheCosmos3EmptyLatentVideo", width=32, height=32, length=5, batch_size=1).outputs[0]
    guider = run("CFGGuider", model=model, positive=pos, negative=neg, cfg=5.0).outputs[0]
    sigmas = run("SeaCacheCosmos3Scheduler", steps=2, shift=3.0, denoise=1.0).outputs[0]
    out = run("SamplerCustomAdvanced", noise=run("RandomNoise", noise_seed=1).outputs[0], guider=guider,
              sampler=run("KSamplerSelect", sampler_name="euler").outputs[0], sigmas=sigmas, latent_image=latent)
    return out.outputs[0]["samples"]


def test_cosmos3_is_a_model_folder_with_the_diffusion_model_extensions(comfy, folders):
    fp = comfy.folder_paths
    loader_module(comfy).register_model_folder()
    paths, extensions = fp.folder_names_and_paths["cosmos3"]
    assert paths[0] == str(Path(fp.models_dir) / "cosmos3") and str(folders["cosmos3"]) in paths
    assert extensions >= set(fp.folder_names_and_paths["diffusion_models"][1]) and ".safetensors" in extensions
    assert any(name.startswith(EDGE + "/") for name in fp.get_filename_list("cosmos3"))


def test_choices_list_checkpoint_folders_of_both_folders_not_their_shards(comfy, folders):
    spec = comfy.node("SeaCacheCosmos3Loader").INPUT_TYPES()["required"]["checkpoint"]
    choices = spec[1]["options"] if spec[0] == "COMBO" else spec[0]  # V3 combos on newer ComfyUI
    assert {EDGE, SUPER, FOUR_STEP} <= set(choices)
    assert not [c for c in choices if c.startswith((EDGE + "/", SUPER + "/", FOUR_STEP + "/"))]


def test_edge_from_models_cosmos3_with_model_shards_and_root_tokenizer(comfy, folders):
    root = folders["cosmos3"] / EDGE
    assert not (root / "text_tokenizer").exists() and (root / "tokenizer.json").is_file()
    assert sorted(p.name for p in (root / "transformer").glob("*.json")) == ["config.json", "model.safetensors.index.json"]
    model, vae, text, _ = load(comfy, EDGE)
    dm = model.model.diffusion_model
    assert dm.config.hidden_act == "relu2" and model.model.distilled_schedule is None
    structured = json.loads((root / "assets" / "negative_prompt.json").read_text(encoding="utf-8"))
    assert text.negative_prompt == json.dumps(structured)  # as NVIDIA's scripts pass it
    out = sample_two_steps(comfy, model, text)
    assert out.shape == (1, 48, 2, 2, 2) and torch.isfinite(out).all()


def test_super_from_diffusion_models_without_assets(comfy, folders):
    assert not (folders["diffusion_models"] / SUPER / "assets").exists()
    model, _, text, _ = load(comfy, SUPER)
    assert text.negative_prompt == ""  # diffusers' pipeline default without a negative prompt
    assert model.model.diffusion_model.config.hidden_act == "silu"
    assert torch.isfinite(sample_two_steps(comfy, model, text)).all()


def test_four_step_checkpoint_gives_its_sigmas(comfy, folders):
    model, *_ = load(comfy, FOUR_STEP)
    sigmas = comfy.run_node("SeaCacheCosmos3DistilledScheduler", model=model).outputs[0]
    shift = json.loads((folders["cosmos3"] / FOUR_STEP / "scheduler" / "scheduler_config.json").read_text())["shift"]
    raw = torch.tensor(json.loads((folders["cosmos3"] / FOUR_STEP / "modular_model_index.json").read_text())["distilled_sigmas"])
    assert torch.allclose(sigmas[:-1], shift * raw / (1 + (shift - 1) * raw)) and sigmas[-1] == 0 and len(sigmas) == 5
    clone = model.clone()  # SeaCache Apply's output still carries it
    assert torch.equal(comfy.run_node("SeaCacheCosmos3DistilledScheduler", model=clone).outputs[0], sigmas)
    plain, *_ = load(comfy, SUPER)
    with pytest.raises(ValueError, match="not a 4-step checkpoint"):
        comfy.run_node("SeaCacheCosmos3DistilledScheduler", model=plain)


@pytest.mark.parametrize("name,drop,messages", [
    (SUPER, "vae", ["vae/", "Wan2.2 VAE"]),
    (EDGE, "tokenizer.json", ["text_tokenizer/tokenizer.json", "tokenizer.json"]),
    (SUPER, "transformer/diffusion_pytorch_model-00002-of-00002.safetensors", ["diffusion_pytorch_model-00002-of-00002.safetensors", "missing"]),
    (EDGE, "transformer/model.safetensors.index.json", ["diffusion_pytorch_model.safetensors", "model.safetensors.index.json"]),
])
def test_missing_parts_are_named_with_their_path(comfy, folders, tmp_path, name, drop, messages):
    source = folders["diffusion_models" if name == SUPER else "cosmos3"] / name
    target = tmp_path / "broken"
    shutil.copytree(source, target)
    victim = target / drop
    shutil.rmtree(victim) if victim.is_dir() else victim.unlink()
    with pytest.raises((FileNotFoundError, ValueError)) as err:
        load(comfy, str(target))
    text = str(err.value)
    assert str(target) in text, text
    for message in messages:
        assert message in text, text


def test_a_latent_other_than_wan22s_is_passed_through_unnormalised(comfy, folders):
    """A checkpoint with a 4-channel latent (the benchmarks' trained proxies) gets a video latent format of its own
    width that leaves the latent as it is; the 48-channel family keeps Wan2.2's normalisation."""
    from cosmos3 import Cosmos3Config
    from seacache_testing.make_tiny_checkpoint import TINY_SIZES, make_tiny_checkpoint, random_transformer_state

    config = Cosmos3Config(**{**TINY_SIZES, "latent_channel": 4, "patch_latent_dim": 16})
    name = "Cosmos3-4-channel-loader-test"
    make_tiny_checkpoint(str(folders["diffusion_models"] / name), transformer_weights=(config, random_transformer_state(config, 0)))
    model, *_ = load(comfy, name)
    latent = torch.randn(1, 4, 2, 4, 4)
    fmt = model.model.latent_format
    assert (fmt.latent_channels, fmt.latent_dimensions) == (4, 3)
    assert torch.equal(model.model.process_latent_in(latent), latent) and torch.equal(model.model.process_latent_out(latent), latent)
    plain, *_ = load(comfy, SUPER)
    assert plain.model.latent_format.latent_channels == 48
    wide = torch.randn(1, 48, 2, 4, 4)
    assert not torch.allclose(plain.model.process_latent_in(wide), wide)
