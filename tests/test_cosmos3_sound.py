"""Parity of the native Cosmos3 sound pathway with diffusers' reference (fp32, tiny ``sound_gen`` configs)."""

import pytest
import torch

from cosmos3 import Cosmos3Config, Cosmos3Transformer

from seacache_testing.cosmos3_reference import SOUND, TINY, check, reference_model, reference_velocity, sigma_and_t, tokens

pytest.importorskip("diffusers")

SOUND_VARIANTS = {
    "qwen3": {},
    "relu2-und-k-norm": {"hidden_act": "relu2", "qk_norm_for_text": False, "use_und_k_norm_for_gen": True},
    "no-fps-modulation": {"enable_fps_modulation": False},
    "no-spatial-reset": {"unified_3d_mrope_reset_spatial_ids": False},
}


def native_sound_from(ref) -> Cosmos3Transformer:
    """Our model with the reference's weights; every key it holds, the sound modules included, must load."""
    model = Cosmos3Transformer(Cosmos3Config.from_dict(dict(ref.config))).float().eval()
    ours = model.state_dict()
    model.load_state_dict({k: v for k, v in ref.state_dict().items() if k in ours}, strict=True)
    return model


@pytest.fixture(scope="module", params=sorted(SOUND_VARIANTS))
def pair(request):
    ref = reference_model(seed=0, **SOUND, **SOUND_VARIANTS[request.param])
    return ref, native_sound_from(ref), request.param


def test_sound_modules_have_the_reference_names_and_count(pair):
    ref, ours, _ = pair
    audio = {k: tuple(v.shape) for k, v in ref.state_dict().items() if k.startswith("audio_")}
    assert audio == {"audio_proj_in.weight": (64, 8), "audio_proj_in.bias": (64,), "audio_proj_out.weight": (8, 64),
                     "audio_proj_out.bias": (8,), "audio_modality_embed": (64,)}
    assert audio == {k: tuple(v.shape) for k, v in ours.state_dict().items() if k.startswith("audio_")}
    assert ours.config.parameter_count() == sum(v.numel() for k, v in ref.state_dict().items()
                                                if not k.startswith(("lm_head.", "norm.")))


@pytest.mark.parametrize(
    "shape,sound_frames,fps",
    [((3, 4, 6), 13, 24.0), ((2, 5, 7), 9, 16.0), ((1, 4, 4), 1, 24.0)],
    ids=["t2v", "odd-fps16", "one-frame"],
)
def test_t2v_with_sound_matches_reference(pair, shape, sound_frames, fps):
    ref, ours, variant = pair
    torch.manual_seed(1)
    latent, sound = torch.randn(1, 48, *shape), torch.randn(1, 8, sound_frames)
    ids = tokens(11, 2)
    sigma, t = sigma_and_t(0.73)
    expected_video, expected_sound = reference_velocity(ref, latent, t, ids, fps=fps, sound=sound)
    with torch.no_grad():
        video, audio = ours(latent, sigma, torch.tensor([ids]), fps=fps, sound=sound)
    assert video.shape == latent.shape and audio.shape == sound.shape == expected_sound.shape
    check(video, expected_video, f"sound {variant} t2v video {shape} fps {fps:g}")
    check(audio, expected_sound, f"sound {variant} t2v sound {sound_frames} frames")


def test_sound_changes_the_video_velocity(pair):
    """The sound tokens take part in the joint attention: the video velocity is not the video-only one."""
    ref, ours, _ = pair
    torch.manual_seed(2)
    latent, ids = torch.randn(1, 48, 2, 4, 4), torch.tensor([tokens(7, 3)])
    with torch.no_grad():
        alone = ours(latent, torch.tensor([0.5]), ids, fps=24.0)
        joint, _ = ours(latent, torch.tensor([0.5]), ids, fps=24.0, sound=torch.randn(1, 8, 5))
    assert (alone - joint).abs().max() > 1e-4 * alone.abs().max()


def test_i2v_with_sound_matches_reference(pair):
    ref, ours, variant = pair
    torch.manual_seed(3)
    latent, clean, sound = torch.randn(1, 48, 3, 4, 4), torch.randn(1, 48, 3, 4, 4), torch.randn(1, 8, 11)
    ids = tokens(9, 4)
    sigma, t = sigma_and_t(0.41)
    ref_input = latent.clone()
    ref_input[:, :, 0] = clean[:, :, 0]
    expected_video, expected_sound = reference_velocity(ref, ref_input, t, ids, clean_frames=(0,), sound=sound)
    with torch.no_grad():
        video, audio = ours(latent, sigma, torch.tensor([ids]), fps=24.0, cond_latent=clean,
                            cond_mask=torch.tensor([[1.0, 0.0, 0.0]]), sound=sound)
    assert torch.equal(video[:, :, 0], torch.zeros_like(video[:, :, 0]))
    check(video, expected_video, f"sound {variant} i2v video")
    check(audio, expected_sound, f"sound {variant} i2v sound")


def test_batch_with_different_prompt_lengths_and_sound(pair):
    """cond and uncond of different lengths with their own sound latents equal two reference calls."""
    ref, ours, variant = pair
    torch.manual_seed(5)
    latent, sound = torch.randn(2, 48, 2, 4, 6), torch.randn(2, 8, 7)
    long_ids, short_ids = tokens(13, 6), tokens(7, 7)
    padded = torch.full((2, 13), -1, dtype=torch.long)
    padded[0] = torch.tensor(long_ids)
    padded[1, :7] = torch.tensor(short_ids)
    sigma = torch.tensor([0.9, 0.9])
    with torch.no_grad():
        video, audio = ours(latent, sigma, padded, fps=24.0, sound=sound)
    for i, ids in enumerate((long_ids, short_ids)):
        expected_video, expected_sound = reference_velocity(ref, latent[i:i + 1], 900.0, ids, sound=sound[i:i + 1])
        check(video[i:i + 1], expected_video, f"sound {variant} batch item {i} video")
        check(audio[i:i + 1], expected_sound, f"sound {variant} batch item {i} sound")


def test_sound_rides_in_the_gen_stack_seam(pair):
    """prepare -> run_gen_stack -> finish is the whole forward, with the sound tokens last in the stack input."""
    _, ours, _ = pair
    torch.manual_seed(11)
    latent, sound, ids = torch.randn(1, 48, 2, 4, 4), torch.randn(1, 8, 6), torch.tensor([tokens(6, 12)])
    sigma = torch.tensor([0.3])
    with torch.no_grad():
        inputs, hidden = ours.prepare(latent, sigma, ids, 24.0, sound=sound)
        out = ours.run_gen_stack(hidden, inputs)
        composed = ours.finish(out, inputs)
        direct = ours(latent, sigma, ids, fps=24.0, sound=sound)
    assert hidden.shape == out.shape == (1, 2 * 2 * 2 + 6, TINY["hidden_size"]) and inputs.sound_frames == 6
    assert torch.equal(composed[0], direct[0]) and torch.equal(composed[1], direct[1])


def test_bad_sound_input_is_refused_before_any_layer():
    ours = Cosmos3Transformer(Cosmos3Config(**{**TINY, "rope_axes_dim": (6, 5, 5)})).eval()
    with pytest.raises(ValueError, match="no sound pathway"):
        ours(torch.randn(1, 48, 1, 2, 2), torch.tensor([0.5]), torch.tensor([[1, 2]]), sound=torch.randn(1, 8, 3))
    sounded = Cosmos3Transformer(Cosmos3Config(**{**TINY, "rope_axes_dim": (6, 5, 5), **SOUND})).eval()
    with pytest.raises(ValueError, match=r"\[B, 8, frames\]"):
        sounded(torch.randn(1, 48, 1, 2, 2), torch.tensor([0.5]), torch.tensor([[1, 2]]), sound=torch.randn(1, 4, 3))
    with pytest.raises(ValueError, match="sound_dim"):
        Cosmos3Config(sound_gen=True)


def test_a_checkpoint_whose_sound_rates_disagree_is_refused():
    """The transformer's sound_latent_fps must equal the audio VAE's sampling_rate / hop; the message names both
    numbers and what to set."""
    from cosmos3.audio_vae import AudioVAEConfig
    from cosmos3.sound import check_sound_rate

    config = Cosmos3Config(**{**TINY, "rope_axes_dim": (6, 5, 5), **SOUND})
    check_sound_rate(config, AudioVAEConfig())  # 48000 / 1920 = 25
    check_sound_rate(Cosmos3Config(**{**config.to_dict(), "sound_latent_fps": 50.0}), AudioVAEConfig(hop_size=960))
    with pytest.raises(ValueError, match=r"sound_latent_fps 25\b.* 50 frames a second \(sampling_rate 48000 / "
                                         r"hop_size 960\).*set sound_latent_fps, or hop_size"):
        check_sound_rate(config, AudioVAEConfig(hop_size=960))
    with pytest.raises(ValueError, match=r"sound_latent_fps 25\b.* 24 frames a second \(sampling_rate 46080 / hop "
                                         r"1920 \(product of dec_strides\)\)"):
        check_sound_rate(config, AudioVAEConfig(sampling_rate=46080))
