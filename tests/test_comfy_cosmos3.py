"""Cosmos3 in a real ComfyUI (needs COMFYUI_PATH): loader, conditioning, sampling with ComfyUI's samplers,
I2V conditioning, the reference schedule and clear errors."""

import sys

import pytest
import torch

from seacache_testing.comfy_runs import LayerCalls, prompt_ids, rel


def decode(tiny, samples):
    with torch.inference_mode():
        return tiny.vae.decode(samples)


def test_loader_returns_native_model_vae_and_tokenizer(tiny):
    from seacache_testing.cosmos3_reference import TINY

    dm = tiny.model.model.diffusion_model
    assert type(tiny.model.model).__name__ == "Cosmos3"
    assert dm.config.hidden_size == TINY["hidden_size"] and len(dm.layers) == TINY["num_hidden_layers"]
    assert tiny.vae.latent_channels == 48
    assert "blurry, low quality" in tiny.text.negative_prompt  # from the structured assets/negative_prompt.json
    assert tiny.model.model.model_sampling.multiplier == 1.0  # identity timestep: the model sees sigma
    assert tiny.model.model.latent_format.latent_channels == 48


def test_t2v_with_comfy_sampler_decodes_to_frames(tiny):
    samples = tiny.sample(tiny.model, steps=6)
    assert samples.shape == (1, 48, 3, 4, 4) and torch.isfinite(samples).all()
    frames = decode(tiny, samples)
    assert frames.shape[-4:] == (9, 64, 64, 3) and torch.isfinite(frames).all()
    assert 0.0 <= frames.min() and frames.max() <= 1.0


def test_comfy_path_equals_native_model(tiny):
    """ComfyUI's BaseModel call (conds, dtype handling, flow denoised) reproduces the plain torch model."""
    import comfy.sampler_helpers
    import comfy.samplers

    dm = tiny.model.model.diffusion_model
    positive = tiny.encode()
    ids = torch.tensor([prompt_ids(positive)])
    x = torch.randn(1, 48, 3, 4, 4, generator=torch.Generator().manual_seed(5))
    sigma = torch.tensor([0.8])
    conds = comfy.samplers.encode_model_conds(tiny.model.model.extra_conds, comfy.sampler_helpers.convert_cond(positive), x, "cpu", "positive")
    model_conds = {k: v.process_cond(batch_size=1, area=None).cond for k, v in conds[0]["model_conds"].items()}
    with torch.inference_mode():
        denoised = tiny.model.model.apply_model(x, sigma, **model_conds)
        velocity = dm(x, sigma, ids, fps=24.0)
    assert rel(denoised, x - 0.8 * velocity) < 1e-5


def test_i2v_keeps_the_encoded_first_frame(tiny):
    image = torch.rand(1, 64, 64, 4)  # RGBA: alpha is dropped
    pos, neg = tiny.encode(), tiny.encode("", negative=True)
    pos, neg, latent = tiny.ns.run_node(
        "SeaCacheCosmos3ImageToVideo", positive=pos, negative=neg, vae=tiny.vae, start_image=image, width=64, height=64, length=9, batch_size=1
    ).outputs
    with torch.inference_mode():
        encoded = tiny.vae.encode(image[..., :3])[:, :, :1]
    assert torch.equal(latent["samples"][:, :, :1], encoded)
    assert latent["noise_mask"].flatten().tolist() == [0.0, 1.0, 1.0]
    samples = tiny.sample(tiny.model, pos, neg, latent, steps=6)
    assert torch.equal(samples[:, :, :1], encoded)
    assert (samples[:, :, 1:] - latent["samples"][:, :, 1:]).abs().max() > 0.1
    assert decode(tiny, samples).shape[-4:] == (9, 64, 64, 3)


def test_batched_cond_uncond_and_text_kv_once_per_run(tiny):
    """cond and uncond (different prompt lengths) share one call per step; text layers run once per run."""
    counter = LayerCalls(tiny.model.model.diffusion_model)
    try:
        positive = tiny.encode("a much longer prompt about a red fox running through deep fresh snow at dawn")
        negative = tiny.encode("", negative=True)
        assert len(prompt_ids(positive)) != len(prompt_ids(negative))
        tiny.sample(tiny.model, positive, negative, steps=5)
    finally:
        counter.close()
    layers = len(counter.layers)
    assert counter.gen == 5 * layers  # one batched call per step
    assert counter.text == layers  # the padded cond+uncond batch, once for the whole run


def test_reference_schedule_matches_diffusers_unipc(tiny):
    from diffusers import UniPCMultistepScheduler

    ref = UniPCMultistepScheduler(use_flow_sigmas=True, flow_shift=10.0, prediction_type="flow_prediction")
    ref.set_timesteps(35)
    sigmas = tiny.ns.run_node("SeaCacheCosmos3Scheduler", steps=35, shift=10.0, denoise=1.0).outputs[0]
    assert torch.equal(sigmas, ref.sigmas.float())
    half = tiny.ns.run_node("SeaCacheCosmos3Scheduler", steps=10, shift=5.0, denoise=0.5).outputs[0]
    assert len(half) == 11 and half[-1] == 0 and half[0] < 0.95


def test_fp8_weights_run(tiny, tmp_path_factory):
    model, *_ = tiny.ns.run_node("SeaCacheCosmos3Loader", checkpoint=tiny.name, weight_dtype="fp8_e4m3fn").outputs
    assert model.model.diffusion_model.layers[0].mlp_moe_gen.up_proj.weight.dtype == torch.float8_e4m3fn
    dm = model.model.diffusion_model
    assert dm.time_embedder.linear_1.weight.dtype == torch.float32
    assert dm.layers[0].input_layernorm_moe_gen.weight.dtype == torch.bfloat16  # norm scales are not fp8
    assert dm.layers[0].self_attn.norm_added_q.weight.dtype == torch.bfloat16
    assert dm.proj_out.weight.dtype == dm.embed_tokens.weight.dtype == torch.bfloat16
    samples = tiny.sample(model, steps=3)
    assert torch.isfinite(samples).all()


def test_memory_estimate_grows_with_sequence_length(tiny):
    m = tiny.model.model
    small, large = m.memory_required([2, 48, 3, 4, 4]), m.memory_required([2, 48, 12, 8, 8])
    assert large == pytest.approx(small * 16)


def test_memory_estimate_is_the_activation_model_and_takes_newer_keywords(tiny):
    """The model's own estimate is the pack's one activation model (fp32 here) and knows nothing of SeaCache: the
    residual history is added by SeaCache itself (next test)."""
    from cosmos3 import activation_bytes

    m, cfg = tiny.model.model, tiny.model.model.diffusion_model.config
    shape = [2, 48, 3, 4, 4]
    expected = activation_bytes(cfg, 2 * cfg.token_count(3, 4, 4), torch.float32)
    assert m.memory_required(shape, cond_shapes={}, model_options={}, future_keyword=1) == expected
    assert m.memory_required(shape) == expected


def test_load_time_estimate_counts_seacache_history(tiny, monkeypatch):
    """The memory ComfyUI frees before sampling includes SeaCache's residual history (2 branches of order + 1
    residuals), also where its estimate passes no model options."""
    asked = []
    load = tiny.ns.mm.load_models_gpu
    monkeypatch.setattr(tiny.ns.mm, "load_models_gpu", lambda models, memory_required=0, **kw: (asked.append(memory_required), load(models, memory_required=memory_required, **kw))[1])
    tiny.sample(tiny.model, steps=1)
    tiny.sample(tiny.seacache(), steps=1)
    cfg = tiny.model.model.diffusion_model.config
    history = 2 * 2 * cfg.token_count(3, 4, 4) * cfg.hidden_size * 4  # SIZE 64x64x9 -> latent 3x4x4, fp32
    assert asked[1] - asked[0] == pytest.approx(history)
    assert "memory_required" not in vars(tiny.model.model)  # the estimate is shadowed for that call only


def test_load_time_estimate_counts_the_chebyshev_history(tiny, monkeypatch):
    """residual_order chebyshev keeps 12 residuals per branch, and the memory ComfyUI frees counts all of them; with
    cpu storage none of them is on the device."""
    asked = []
    load = tiny.ns.mm.load_models_gpu
    monkeypatch.setattr(tiny.ns.mm, "load_models_gpu", lambda models, memory_required=0, **kw: (asked.append(memory_required), load(models, memory_required=memory_required, **kw))[1])
    tiny.sample(tiny.model, steps=1)
    tiny.sample(tiny.seacache(residual_order="chebyshev"), steps=1)
    tiny.sample(tiny.seacache(residual_order="chebyshev", residual_storage="cpu"), steps=1)
    cfg = tiny.model.model.diffusion_model.config
    residual = cfg.token_count(3, 4, 4) * cfg.hidden_size * 4  # SIZE 64x64x9 -> latent 3x4x4, fp32
    assert asked[1] - asked[0] == pytest.approx(2 * 12 * residual)  # cond + uncond
    assert asked[2] == asked[0]


def test_attention_overrides_apply_to_cosmos3(tiny):
    """An attention-override node's function (``optimized_attention_override``) runs every generator attention,
    receives grouped K/V unrepeated where this ComfyUI supports it, and gives the same result as without it."""
    calls = []

    def override(func, *args, **kwargs):
        q, k = args[0], args[1]
        calls.append((q.shape[1], k.shape[1], kwargs.get("enable_gqa", False)))
        return func(*args, **kwargs)

    patched = tiny.model.clone()
    patched.model_options.setdefault("transformer_options", {})["optimized_attention_override"] = override
    out = tiny.sample(patched, steps=2)
    layers = len(tiny.model.model.diffusion_model.layers)
    assert len(calls) == 2 * layers * 2  # 2 steps x layers x 2 items (cond/uncond prompts differ in length)
    attention_module = sys.modules[tiny.model.model.diffusion_model.attention.__module__]
    cfg = tiny.model.model.diffusion_model.config
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    expected_kv = kv_heads if attention_module.COMFY_ATTENTION_HAS_GQA else heads
    assert calls[0] == (heads, expected_kv, attention_module.COMFY_ATTENTION_HAS_GQA)
    assert torch.allclose(out, tiny.sample(tiny.model, steps=2), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "size,message",
    [
        (dict(width=70, height=64, length=9), "width 70 is not a multiple of 16 \\(nearest: 64 or 80\\)"),
        (dict(width=64, height=64, length=10), "length 10 is not 4k\\+1 \\(nearest: 9 or 13\\)"),
    ],
)
def test_bad_sizes_name_the_nearest_valid_values(tiny, size, message):
    with pytest.raises(ValueError, match=message):
        tiny.ns.run_node("SeaCacheCosmos3EmptyLatentVideo", **size, batch_size=1)


def test_i2v_image_batch_uses_first_image(tiny):
    images = torch.stack([torch.zeros(64, 64, 3), torch.ones(64, 64, 3)])
    pos, neg = tiny.encode(), tiny.encode("", negative=True)
    out = tiny.ns.run_node("SeaCacheCosmos3ImageToVideo", positive=pos, negative=neg, vae=tiny.vae, start_image=images, width=64, height=64, length=9, batch_size=2).outputs
    with torch.inference_mode():
        first = tiny.vae.encode(images[:1])[:, :, :1]
    assert out[2]["samples"].shape[0] == 2
    assert torch.equal(out[2]["samples"][1:, :, :1], first)


def test_missing_checkpoint_and_not_cosmos3_errors(tiny, tmp_path):
    from safetensors.torch import save_file

    with pytest.raises(FileNotFoundError, match="no-such-model"):
        tiny.ns.run_node("SeaCacheCosmos3Loader", checkpoint="no-such-model", weight_dtype="default")
    other = tmp_path / "flux.safetensors"
    save_file({"double_blocks.0.img_attn.qkv.weight": torch.zeros(2, 2)}, str(other))
    with pytest.raises(ValueError, match="proj_in.weight"):
        tiny.ns.run_node("SeaCacheCosmos3Loader", checkpoint=str(other), weight_dtype="default")


def test_model_sampling_sd3_node_keeps_the_model_on_sigma(tiny):
    """A shift node that installs ComfyUI's x1000 flow timesteps must not change what the network sees."""
    patched = tiny.ns.run_node("ModelSamplingSD3", model=tiny.model, shift=10.0).outputs[0]
    assert patched.get_model_object("model_sampling").multiplier == 1000
    assert rel(tiny.sample(patched, steps=6), tiny.sample(tiny.model, steps=6)) < 1e-5


def test_prompt_states_the_sampled_latent_size(tiny):
    """The resolution and duration sentences follow the latent actually sampled (set once, on the latent node)."""
    positive = tiny.encode()
    small, large = prompt_ids(positive), prompt_ids(positive, dict(width=128, height=64, length=13))
    assert small != large
    expected = tiny.text.tokenizer.encode("a red fox running through snow", negative=False, width=128, height=64, frames=13, fps=24.0)
    assert large == expected
    wide = tiny.sample(tiny.model, latent=tiny.empty(width=128, length=13), steps=2)
    assert wide.shape[-3:] == (4, 4, 8)


def test_negative_encode_uses_checkpoint_prompt_and_inverse_templates(tiny):
    neg = prompt_ids(tiny.encode("", negative=True))
    expected = tiny.text.tokenizer.encode(tiny.text.negative_prompt, negative=True, width=64, height=64, frames=9, fps=24.0)
    assert neg == expected
    as_positive = prompt_ids(tiny.encode(tiny.text.negative_prompt))
    assert as_positive != neg  # the positive node writes "is of", the negative "is not of"


def test_recipe_size_720p_is_accepted_with_an_odd_latent(tiny):
    latent = tiny.ns.run_node("SeaCacheCosmos3EmptyLatentVideo", width=1280, height=720, length=189, batch_size=1).outputs[0]
    assert list(latent["samples"].shape) == [1, 48, 48, 45, 80]
    odd = tiny.sample(tiny.model, latent=tiny.empty(width=48, height=80), steps=2)
    assert odd.shape[-2:] == (5, 3) and torch.isfinite(odd).all()


@pytest.mark.parametrize("ops_name", ["disable_weight_init", "manual_cast"])
def test_nemotron_norm_from_comfy_ops_is_exact(comfy, ops_name):
    """Edge's Nemotron norms built from ComfyUI's RMSNorm op (cast weights or not) equal diffusers' bit for bit."""
    import comfy.ops
    from diffusers.models.transformers.transformer_cosmos3 import Cosmos3NemotronRMSNorm

    from cosmos3.ops import nemotron_norm_class

    torch.manual_seed(0)
    weight = 1.0 + 0.3 * torch.randn(32)
    x = (2.0 * torch.randn(3, 5, 32)).to(torch.bfloat16)
    ref = Cosmos3NemotronRMSNorm(32, eps=1e-6)
    ref.weight.data = weight.to(torch.bfloat16)
    ops = getattr(comfy.ops, ops_name)
    norm = nemotron_norm_class(ops)(32, eps=1e-6, dtype=torch.bfloat16)
    norm.weight = torch.nn.Parameter(weight.to(torch.bfloat16), requires_grad=False)
    assert isinstance(norm, ops.RMSNorm)
    with torch.inference_mode():
        got = norm(x)
    assert got.dtype == torch.bfloat16 and torch.equal(got, ref(x))
