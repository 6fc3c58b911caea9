"""Parity of the native Cosmos3 audio VAE decoder with diffusers' ``Cosmos3AVAEAudioTokenizer`` (fp32, tiny)."""

import json
import os

import pytest
import torch

from cosmos3.audio_vae import AudioVAEConfig, load_audio_vae, read_audio_vae_config

pytest.importorskip("diffusers")
from seacache_testing.tiny_audio_vae import build_tiny_audio_vae, write_tiny_audio_vae

RTOL = 2e-5


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    write_tiny_audio_vae(root / "sound_tokenizer", seed=0)
    return str(root)


@pytest.mark.parametrize("batch,frames", [(1, 5), (2, 7), (1, 1)])
def test_decoder_matches_diffusers(root, batch, frames):
    ref = build_tiny_audio_vae(seed=0)
    ours = load_audio_vae(root)
    torch.manual_seed(batch * 10 + frames)
    latent = torch.randn(batch, 8, frames)
    with torch.no_grad():
        expected, got = ref.decode(latent), ours.decode(latent)
    hop = ours.config.hop
    assert got.shape == expected.shape == (batch, 2, frames * hop) and hop == 1920
    err = ((got - expected).abs().max() / expected.abs().max()).item()
    print(f"parity audio VAE decode batch {batch} frames {frames}: max rel err {err:.2e}")
    assert err < RTOL
    assert 0 < expected.abs().max() < 1  # the clamp does not hide differences


def test_encoder_weights_are_skipped_and_config_read(root):
    with open(os.path.join(root, "sound_tokenizer", "config.json")) as f:
        raw = json.load(f)
    config = AudioVAEConfig.from_dict(raw)
    assert (config.sampling_rate, config.vocoder_input_dim, config.hop, config.dec_dim) == (48000, 8, 1920, 2)
    assert all(k.startswith("decoder.") for k in load_audio_vae(root).state_dict())


def test_clear_errors(root, tmp_path):
    with pytest.raises(FileNotFoundError, match="sound_tokenizer"):
        load_audio_vae(str(tmp_path))
    with pytest.raises(ValueError, match="dec_final_tanh"):
        AudioVAEConfig.from_dict({"dec_final_tanh": True})
    with pytest.raises(ValueError, match=r"\[B, 8, frames\]"):
        load_audio_vae(root).decode(torch.randn(1, 4, 3))


def test_shipped_size_has_diffusers_keys_and_shapes():
    """The default (shipped) configuration builds the same decoder tensors as diffusers' (meta device, no memory)."""
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer

    from cosmos3.audio_vae import Cosmos3AudioVAE

    with torch.device("meta"):
        ref = Cosmos3AVAEAudioTokenizer(encoder_enabled=False)
    ours = Cosmos3AudioVAE(AudioVAEConfig(), device="meta")
    expected = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert expected == {k: tuple(v.shape) for k, v in ours.state_dict().items()}
    print(f"shipped audio VAE decoder: {sum(v.numel() for v in ours.state_dict().values()) / 1e6:.1f}M parameters")


def diffusers_sound_frames(sound_tokenizer, frames: int, fps: float, sound_latent_fps: float) -> int:
    """Sound latent frames diffusers' ``Cosmos3OmniPipeline.prepare_latents`` makes for a text-to-video clip with
    sound, run on ``sound_tokenizer`` (a real diffusers audio VAE) and stand-ins for the transformer config and the
    video VAE, which the sound length does not read."""
    from types import SimpleNamespace

    from diffusers.pipelines.cosmos.pipeline_cosmos3_omni import Cosmos3OmniPipeline

    def encode_video(pixels):  # the Wan2.2 VAE's latent shape, zeros
        return torch.zeros(1, 48, (pixels.shape[2] - 1) // 4 + 1, pixels.shape[3] // 16, pixels.shape[4] // 16)

    standin = SimpleNamespace(
        transformer=SimpleNamespace(config=SimpleNamespace(sound_dim=8, sound_latent_fps=sound_latent_fps)),
        sound_tokenizer=sound_tokenizer, _encode_video=encode_video)
    out = Cosmos3OmniPipeline.prepare_latents(standin, num_frames=frames, height=32, width=32, fps=fps, device="cpu",
                                              dtype=torch.float32, enable_sound=True)
    sound_latents, fps_sound = out[1], out[4]
    assert sound_latents.shape[0] == 8 and fps_sound == sound_latent_fps
    return sound_latents.shape[1]


@pytest.mark.parametrize("hop_size,frames,fps,expected", [(960, 93, 24.0, 194), (None, 93, 24.0, 97),
                                                         (960, 9, 16.0, 29), (None, 1, 24.0, 2)])
def test_sound_length_follows_diffusers_pipeline(tmp_path, hop_size, frames, fps, expected):
    """A ``hop_size`` in sound_tokenizer/config.json sizes the sound (decoder strides still 1920), as in diffusers'
    pipeline; the decoder still upsamples by its strides, as diffusers' does."""
    from diffusers.models.autoencoders.autoencoder_cosmos3_audio import Cosmos3AVAEAudioTokenizer

    write_tiny_audio_vae(tmp_path / "sound_tokenizer", seed=0, hop_size=hop_size)
    config = read_audio_vae_config(str(tmp_path))
    assert config.hop == (hop_size or 1920) and config.latent_fps == 48000 / (hop_size or 1920)
    reference = Cosmos3AVAEAudioTokenizer.from_pretrained(str(tmp_path / "sound_tokenizer")).eval()
    got = config.sound_frames(frames, fps)
    print(f"sound length hop_size {hop_size}, {frames} frames at {fps:g} fps: ours {got}, diffusers "
          f"{diffusers_sound_frames(reference, frames, fps, config.latent_fps)}")
    assert got == diffusers_sound_frames(reference, frames, fps, config.latent_fps) == expected
    latent = torch.randn(1, 8, 3)
    with torch.no_grad():
        assert load_audio_vae(str(tmp_path)).decode(latent).shape == reference.decode(latent).shape == (1, 2, 3 * 1920)
