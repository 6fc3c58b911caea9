"""Loading the official checkpoint layout: sharded weights, config, unused keys, and clear errors."""

import json
import os

import pytest
import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer, expected_tensors, load_weights, read_config, shard_files, tensor_shapes
from cosmos3.checkpoint import (
    infer_config,
    read_distilled_schedule,
    read_negative_prompt,
    tokenizer_folder,
)

from seacache_testing.make_tiny_checkpoint import (PRESETS, device_transformer_state, make_tiny_checkpoint,
                                                  random_transformer_state)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    pytest.importorskip("diffusers")
    return make_tiny_checkpoint(str(tmp_path_factory.mktemp("ckpt") / "cosmos3-tiny"))


def load_native(path):
    files = shard_files(path)
    model = Cosmos3Transformer(read_config(path)).eval()
    counts = load_weights(model, files)
    return model, counts


def test_sharded_checkpoint_matches_diffusers_loader(ckpt):
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer
    from seacache_testing.cosmos3_reference import reference_velocity

    from safetensors.torch import load_file

    with open(os.path.join(ckpt, "transformer", "config.json")) as f:
        ref = Cosmos3OmniTransformer.from_config(json.load(f)).float().eval()
    state = {}
    for file in shard_files(ckpt):
        state.update(load_file(file))
    ref.load_state_dict(state, strict=True)  # the generated keys are exactly diffusers' names
    ours, counts = load_native(ckpt)
    assert counts["skipped"] == 2 and counts["unexpected"] == 0  # lm_head.weight, norm.weight
    assert len(shard_files(ckpt)) == 2
    torch.manual_seed(0)
    latent = torch.randn(1, 48, 2, 4, 4)
    ids = [5, 17, 99, 3]
    sigma = torch.tensor([0.6])
    expected = reference_velocity(ref, latent, (sigma * 1000).item(), ids)
    with torch.no_grad():
        got = ours(latent, sigma, torch.tensor([ids]), fps=24.0)
    assert ((got - expected).abs().max() / expected.abs().max()).item() < 2e-5


def test_merged_single_file_infers_config(ckpt, tmp_path):
    from safetensors.torch import load_file, save_file

    merged = {}
    for f in shard_files(ckpt):
        merged.update(load_file(f))
    single = str(tmp_path / "cosmos3_merged.safetensors")
    save_file(merged, single)
    inferred = infer_config(tensor_shapes([single]))
    assert inferred == read_config(ckpt)
    model = Cosmos3Transformer(inferred)
    assert load_weights(model, shard_files(single))["loaded"] == len(model.state_dict())


def test_missing_shard_names_the_path(ckpt, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(ckpt, broken)
    victim = broken / "transformer" / "diffusion_pytorch_model-00002-of-00002.safetensors"
    victim.unlink()
    with pytest.raises(FileNotFoundError, match="00002-of-00002"):
        shard_files(str(broken))
    with pytest.raises(FileNotFoundError, match="nowhere"):
        shard_files(str(tmp_path / "nowhere"))


def test_not_cosmos3_names_expected_keys(tmp_path):
    from safetensors.torch import save_file

    other = str(tmp_path / "flux.safetensors")
    save_file({"double_blocks.0.img_attn.qkv.weight": torch.zeros(2, 2)}, other)
    with pytest.raises(ValueError, match="proj_in.weight"):
        infer_config(tensor_shapes([other]))


def test_shape_mismatch_is_reported(ckpt, tmp_path):
    cfg = read_config(ckpt)
    wrong = Cosmos3Transformer(type(cfg)(**{**cfg.to_dict(), "intermediate_size": cfg.intermediate_size * 2}))
    before = {k: v.clone() for k, v in wrong.state_dict().items()}
    with pytest.raises(ValueError, match="does not match its config.json.*mlp"):
        load_weights(wrong, shard_files(ckpt))
    assert all(torch.equal(before[k], v) for k, v in wrong.state_dict().items()), "nothing may load on a mismatch"


def test_expected_tensors_keep_precise_dtypes_under_fp8(ckpt):
    expected = expected_tensors(read_config(ckpt), torch.float8_e4m3fn)
    assert expected["layers.0.mlp_moe_gen.up_proj.weight"][1] == torch.float8_e4m3fn
    assert expected["norm_moe_gen.weight"][1] == torch.bfloat16 and expected["proj_in.weight"][1] == torch.bfloat16
    assert expected["time_embedder.linear_1.weight"][1] == torch.float32
    assert set(expected) == set(Cosmos3Transformer(read_config(ckpt)).state_dict())


def test_config_round_trip_from_diffusers_json(ckpt):
    with open(os.path.join(ckpt, "transformer", "config.json")) as f:
        raw = json.load(f)
    cfg = read_config(ckpt)
    assert cfg.hidden_size == raw["hidden_size"] and cfg.rope_axes_dim == tuple(raw["rope_axes_dim"])


# ---------------------------------------------------------------------------------------------- family layouts


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    """One generated checkpoint per family preset (written lazily, once per module)."""
    pytest.importorskip("diffusers")
    base, made = tmp_path_factory.mktemp("family"), {}

    def get(preset):
        if preset not in made:
            made[preset] = make_tiny_checkpoint(str(base / preset), preset=preset)
        return made[preset]

    return get


@pytest.mark.parametrize("preset,stem", [("tiny-edge", "model"), ("tiny-i2v", "model"), ("tiny-super", "diffusion_pytorch_model"), ("tiny-bias", "diffusion_pytorch_model")])
def test_family_checkpoint_loads_and_matches_diffusers(family, preset, stem):
    """Each preset's layout is found (both shard namings) and its weights run like diffusers' model on them."""
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer
    from safetensors.torch import load_file

    from seacache_testing.cosmos3_reference import reference_velocity

    root = family(preset)
    files = shard_files(root)
    assert len(files) == 2 and all(os.path.basename(f).startswith(stem + "-") for f in files)
    with open(os.path.join(root, "transformer", "config.json")) as f:
        ref = Cosmos3OmniTransformer.from_config(json.load(f)).float().eval()
    state = {}
    for file in files:
        state.update(load_file(file))
    ref.load_state_dict(state, strict=True)
    ours, counts = load_native(root)
    assert counts["unexpected"] == 0
    torch.manual_seed(1)
    latent, ids, sigma = torch.randn(1, 48, 2, 4, 4), [7, 3, 250, 9, 11], torch.tensor([0.45])
    expected = reference_velocity(ref, latent, 450.0, ids)
    with torch.no_grad():
        got = ours(latent, sigma, torch.tensor([ids]), fps=24.0)
    assert ((got - expected).abs().max() / expected.abs().max()).item() < 2e-5


def test_merged_edge_file_infers_its_architecture(family, tmp_path):
    from safetensors.torch import load_file, save_file

    root = family("tiny-edge")
    merged = {}
    for f in shard_files(root):
        merged.update(load_file(f))
    single = tmp_path / "model.safetensors"
    save_file(merged, str(single))
    inferred = infer_config(tensor_shapes([str(single)]))
    assert inferred == read_config(root)
    assert (inferred.hidden_act, inferred.qk_norm_for_text, inferred.use_und_k_norm_for_gen) == ("relu2", False, True)
    assert shard_files(str(tmp_path)) == [str(single)]  # a lone model.safetensors in a folder


def test_no_weights_names_both_namings(tmp_path):
    (tmp_path / "transformer").mkdir()
    with pytest.raises(FileNotFoundError) as info:
        shard_files(str(tmp_path))
    message = str(info.value)
    assert str(tmp_path / "transformer") in message
    for name in ("diffusion_pytorch_model.safetensors.index.json", "model.safetensors.index.json", "model.safetensors"):
        assert name in message


def test_tokenizer_folder_in_text_tokenizer_or_root(family, ckpt, tmp_path):
    assert tokenizer_folder(ckpt) == os.path.join(ckpt, "text_tokenizer")
    edge = family("tiny-edge")
    assert tokenizer_folder(edge) == edge and not os.path.isdir(os.path.join(edge, "text_tokenizer"))
    assert tokenizer_folder(os.path.join(ckpt, "text_tokenizer")) == os.path.join(ckpt, "text_tokenizer")
    with pytest.raises(FileNotFoundError) as info:
        tokenizer_folder(str(tmp_path))
    assert str(tmp_path / "text_tokenizer" / "tokenizer.json") in str(info.value)
    assert str(tmp_path / "tokenizer.json") in str(info.value)


def test_negative_prompt_is_the_json_dumps_of_the_asset(family, ckpt, tmp_path):
    with open(os.path.join(ckpt, "assets", "negative_prompt.json")) as f:
        structured = json.load(f)
    assert isinstance(structured, dict) and read_negative_prompt(ckpt) == json.dumps(structured)
    assert json.loads(read_negative_prompt(ckpt)) == structured
    assert read_negative_prompt(family("tiny-super")) == ""  # Super ships no assets/
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "negative_prompt.json").write_text(json.dumps("plain text"), encoding="utf-8")
    assert read_negative_prompt(str(tmp_path)) == "plain text"
    (tmp_path / "assets" / "negative_prompt.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="negative_prompt.json"):
        read_negative_prompt(str(tmp_path))


@pytest.mark.parametrize("stochastic", [True, False])
def test_distilled_schedule_equals_the_diffusers_scheduler(family, ckpt, tmp_path, stochastic):
    """The 4-step sigmas are what diffusers' FlowMatchEuler scheduler makes of ``distilled_sigmas``."""
    import shutil

    from diffusers import FlowMatchEulerDiscreteScheduler

    root = tmp_path / "t2i-4step"
    shutil.copytree(family("tiny-t2i-4step"), root)
    config_path = root / "scheduler" / "scheduler_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["stochastic_sampling"] = stochastic
    config_path.write_text(json.dumps(config), encoding="utf-8")
    schedule = read_distilled_schedule(str(root))
    with open(root / "modular_model_index.json") as f:
        raw = json.load(f)["distilled_sigmas"]
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(config)
    scheduler.set_timesteps(sigmas=raw)
    assert schedule.sigmas == scheduler.sigmas.tolist() and len(schedule.sigmas) == 5
    assert schedule.sigmas != raw + [0.0]  # the shift was applied
    assert schedule.sampler == ("lcm" if stochastic else "euler")
    assert read_distilled_schedule(ckpt) is None
    config["shift_terminal"] = 0.1
    config_path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ValueError, match="shift_terminal"):
        read_distilled_schedule(str(root))


def test_sound_checkpoint_loads_its_sound_modules(tmp_path):
    """A ``sound_gen`` checkpoint: config.json and a merged file's shapes both give the sound config, the audio
    weights load (none skipped but lm_head/norm), and the joint velocity matches diffusers' loader."""
    pytest.importorskip("diffusers")
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3OmniTransformer
    from safetensors.torch import load_file, save_file

    from seacache_testing.cosmos3_reference import reference_velocity

    root = make_tiny_checkpoint(str(tmp_path / "cosmos3-sound"), preset="tiny-sound")
    config = read_config(root)
    assert (config.sound_gen, config.sound_dim, config.sound_latent_fps) == (True, 8, 25.0)
    ours, counts = load_native(root)
    assert counts["skipped"] == 2 and counts["unexpected"] == 0
    assert ours.audio_modality_embed.abs().max() > 0
    state = {}
    for file in shard_files(root):
        state.update(load_file(file))
    with open(os.path.join(root, "transformer", "config.json")) as f:
        ref = Cosmos3OmniTransformer.from_config(json.load(f)).float().eval()
    ref.load_state_dict(state, strict=True)
    single = str(tmp_path / "merged.safetensors")
    save_file(state, single)
    assert infer_config(tensor_shapes([single])) == config
    torch.manual_seed(0)
    latent, sound, ids = torch.randn(1, 48, 2, 4, 4), torch.randn(1, 8, 9), [5, 17, 99, 3]
    expected_video, expected_sound = reference_velocity(ref, latent, 600.0, ids, sound=sound)
    with torch.no_grad():
        video, audio = ours(latent, torch.tensor([0.6]), torch.tensor([ids]), fps=24.0, sound=sound)
    assert ((video - expected_video).abs().max() / expected_video.abs().max()).item() < 2e-5
    assert ((audio - expected_sound).abs().max() / expected_sound.abs().max()).item() < 2e-5


def test_video_only_config_skips_sound_weights(tmp_path):
    """A config without sound_gen on a sound checkpoint loads the video model and skips the audio tensors."""
    root = make_tiny_checkpoint(str(tmp_path / "cosmos3-sound"), preset="tiny-sound")
    config = read_config(root)
    video_only = type(config)(**{**config.to_dict(), "sound_gen": False, "sound_dim": None})
    counts = load_weights(Cosmos3Transformer(video_only).eval(), shard_files(root))
    assert counts["skipped"] == 2 + 5 and counts["unexpected"] == 0


def test_device_drawn_weights_have_every_checkpoint_key():
    """The nano preset's weights (drawn on the GPU check's device) have exactly the keys, shapes and the bf16 storage
    of the checkpoint the tiny presets write, shown at tiny sizes on the CPU; nano itself is Cosmos3-Nano's config."""
    config = Cosmos3Config(**PRESETS["tiny"].sizes)
    drawn, written = device_transformer_state(config, 0, "cpu"), random_transformer_state(config, 0)
    assert {k: v.shape for k, v in drawn.items()} == {k: v.shape for k, v in written.items()}
    assert {v.dtype for k, v in drawn.items() if k.startswith("layers.")} == {torch.bfloat16}
    for name, value in drawn.items():  # random at the writer's scale, not left at an initial value
        if value.ndim == 2 and name != "lm_head.weight":
            assert abs(value.float().std().item() * value.shape[-1] ** 0.5 - 1) < 0.2, name
    nano = Cosmos3Config(**PRESETS["nano"].sizes)
    assert (nano.hidden_size, nano.num_hidden_layers, nano.intermediate_size, nano.vocab_size) == (4096, 36, 12288, 151936)
