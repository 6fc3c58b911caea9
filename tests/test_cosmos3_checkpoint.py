"""Loading the official checkpoint layout: sharded weights, config, unused keys, and clear errors."""

import json
import os

import pytest
import torch

from cosmos3 import Cosmos3Transformer, expected_tensors, load_weights, read_config, shard_files, tensor_shapes
from cosmos3.checkpoint import infer_config

from tiny_checkpoint import make_tiny_checkpoint


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
    from cosmos3_reference import reference_velocity

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
