"""Cosmos3 video with sound in a real ComfyUI (needs COMFYUI_PATH): audio-video latents in ComfyUI's NestedTensor
convention, the ComfyUI path against the native model, T2V/I2V sampling with and without SeaCache, decoding to
AUDIO and a saved video with its audio stream; on a ComfyUI without NestedTensor latents, the clear error."""

import importlib.util
import math
import sys

import pytest
import torch

from seacache_testing.comfy_runs import SIZE, LayerCalls, prompt_ids, rel


@pytest.fixture(scope="module")
def sound(comfy, tmp_path_factory):
    """The tiny-sound checkpoint (sound_gen transformer + sound_tokenizer/) through the Cosmos3 Loader."""
    pytest.importorskip("diffusers")
    from seacache_testing.comfy_runs import load_tiny

    return load_tiny(comfy, tmp_path_factory, preset="tiny-sound")


def has_av_latents() -> bool:
    return importlib.util.find_spec("comfy.nested_tensor") is not None


@pytest.fixture
def av(sound):
    """Skip where this ComfyUI has no audio-video latents (test_without_nested_tensor_names_the_version covers it)."""
    if not has_av_latents():
        pytest.skip("this ComfyUI has no NestedTensor audio-video latents")
    return sound


def empty_av(tiny, fps=24.0, batch_size=1):
    return tiny.ns.run_node("SeaCacheCosmos3EmptyAVLatent", **SIZE, fps=fps, batch_size=batch_size,
                            audio_vae=tiny.audio_vae).outputs[0]


def expected_sound_frames(frames, fps, sampling_rate=48000, hop=1920):
    """diffusers' pipeline: int(num_frames / fps * sampling_rate) samples, rounded up to whole latent frames."""
    return math.ceil(int(frames / fps * sampling_rate) / hop)


def test_without_nested_tensor_names_the_version(sound):
    if has_av_latents():
        pytest.skip("this ComfyUI has NestedTensor latents")
    with pytest.raises(RuntimeError, match=r"nested_tensor.*0\.33\.0"):
        empty_av(sound)


def test_empty_av_latent_sizes_the_sound_from_fps(av):
    latent = empty_av(av, fps=24.0, batch_size=2)["samples"]
    video, audio = latent.unbind()
    assert video.shape == (2, 48, 3, 4, 4) and audio.shape == (2, 8, expected_sound_frames(9, 24.0)) == (2, 8, 10)
    other = empty_av(av, fps=16.0)["samples"].unbind()[1]
    assert other.shape[2] == expected_sound_frames(9, 16.0) == 15
    assert not video.any() and not audio.any()


def test_comfy_av_call_equals_native_model(av):
    """ComfyUI's BaseModel call on the sampler's packed AV latent reproduces the native model's joint velocity."""
    import comfy.sampler_helpers
    import comfy.samplers
    import comfy.utils

    base, dm = av.model.model, av.model.model.diffusion_model
    positive = av.encode()
    ids = torch.tensor([prompt_ids(positive)])
    g = torch.Generator().manual_seed(5)
    video, audio = torch.randn(1, 48, 3, 4, 4, generator=g), torch.randn(1, 8, 10, generator=g)
    packed, shapes = comfy.utils.pack_latents([video, audio])
    base.latent_shapes = shapes
    try:
        conds = comfy.samplers.encode_model_conds(base.extra_conds, comfy.sampler_helpers.convert_cond(positive), packed,
                                                  "cpu", "positive", latent_shapes=shapes)
        model_conds = {k: v.process_cond(batch_size=1, area=None).cond for k, v in conds[0]["model_conds"].items()}
        with torch.inference_mode():
            denoised = base.apply_model(packed, torch.tensor([0.8]), **model_conds)
            v_video, v_audio = dm([video, audio], torch.tensor([0.8]), ids, fps=24.0)
    finally:
        base.latent_shapes = None
    expected = comfy.utils.pack_latents([video - 0.8 * v_video, audio - 0.8 * v_audio])[0]
    assert denoised.shape == packed.shape and rel(denoised, expected) < 1e-5


def sample_av(tiny, latent, model=None, positive=None, negative=None, steps=6):
    return tiny.sample(model or tiny.model, positive, negative, latent=latent, steps=steps)


def test_t2v_with_sound_samples_and_decodes(av):
    samples = sample_av(av, empty_av(av))
    video, audio = samples.unbind()
    assert video.shape == (1, 48, 3, 4, 4) and audio.shape == (1, 8, 10)
    assert torch.isfinite(video).all() and torch.isfinite(audio).all() and audio.abs().max() > 0.1
    frames = av.ns.run_node("VAEDecode", samples={"samples": samples}, vae=av.vae).outputs[0]
    assert frames.shape == (9, 64, 64, 3)
    sound = av.ns.run_node("SeaCacheCosmos3SoundDecode", samples={"samples": samples}, audio_vae=av.audio_vae).outputs[0]
    assert sound["sample_rate"] == 48000 and sound["waveform"].shape == (1, 2, 10 * 1920)
    assert sound["waveform"].dtype == torch.float32 and 0 < sound["waveform"].abs().max() <= 1.0


def test_i2v_with_sound_keeps_frame_zero_with_and_without_seacache(av):
    image = torch.rand(1, 64, 64, 3)
    pos, neg = av.encode(), av.encode("", negative=True)
    pos, neg, latent = av.ns.run_node("SeaCacheCosmos3ImageToVideo", positive=pos, negative=neg, vae=av.vae,
                                      start_image=image, width=64, height=64, length=9, batch_size=1).outputs
    joint = av.ns.run_node("SeaCacheCosmos3AddSound", latent=latent, fps=24.0, audio_vae=av.audio_vae).outputs[0]
    assert joint["noise_mask"] is latent["noise_mask"] and joint["samples"].unbind()[1].shape == (1, 8, 10)
    video, audio = sample_av(av, joint, positive=pos, negative=neg).unbind()
    assert torch.equal(video[:, :, :1], latent["samples"][:, :, :1])
    assert (video[:, :, 1:] - latent["samples"][:, :, 1:]).abs().max() > 0.1 and audio.abs().max() > 0.1
    exact = sample_av(av, joint, model=av.seacache(threshold=0.0), positive=pos, negative=neg).unbind()
    assert torch.equal(exact[0], video) and torch.equal(exact[1], audio)  # SeaCache at threshold 0: bit-identical


def test_seacache_on_av_threshold_zero_is_bit_identical_and_defaults_reuse(av):
    latent = empty_av(av)
    plain = sample_av(av, latent, steps=10)
    exact = sample_av(av, latent, model=av.seacache(threshold=0.0), steps=10)
    for a, b in zip(plain.unbind(), exact.unbind()):
        assert torch.equal(a, b)
    cached = av.seacache()
    calls = LayerCalls(av.model.model.diffusion_model)
    try:
        first = sample_av(av, latent, model=cached, steps=10)
        gen_calls = calls.gen
    finally:
        calls.close()
    report = cached.model_options["transformer_options"]["seacache_settings"].last_run
    second = sample_av(av, latent, model=cached, steps=10)
    print(f"SeaCache on Cosmos3 AV (10 steps, defaults): reused {report['reused']} of {report['calls']} calls")
    assert report["reused"] > 0 and report["uncached_calls"] == 0
    assert gen_calls == (report["calls"] - report["reused"]) * len(calls.layers)
    for a, b, p in zip(first.unbind(), second.unbind(), plain.unbind()):
        assert torch.equal(a, b) and torch.isfinite(a).all() and rel(a, p) < 0.5
    assert "seacache_settings" not in av.model.model_options.get("transformer_options", {})


def test_the_gate_reads_the_sound_stream_with_one_host_read_per_call(av, monkeypatch):
    """SeaCache Apply's runtime hands the gate the sound stream of the packed audio-video latent: at the first
    measured step each branch's distance is the mean of its video distance (the same run with the sound withheld,
    as before the joint gate) and the relative L1 distance of its sound latents filtered along time at the call's
    sigma (SeaCacheConfig.sound_weight 1), and the gate still reads the host once per call."""
    from seacache_core import item_distances, sea_filter_float32
    from seacache_core.sea_filter import SOUND_FILTER_POWER
    from seacache_testing.host_transfers import HostReads

    settings = av.seacache().model_options["transformer_options"]["seacache_settings"]
    pack = type(settings).__module__.split(".nodes.")[0]  # the pack as ComfyUI loaded it
    gate_class = sys.modules[f"{pack}.seacache_core.run"].SeaCacheRun
    decide, seen = gate_class.decide, []

    def run(withhold_sound: bool) -> dict:
        def spy(self, latent, sigma, keys, filter_sigma=None, sound=None):
            seen.append((list(keys), latent.shape, None if sound is None else sound.clone(), filter_sigma))
            return decide(self, latent, sigma, keys, filter_sigma, None if withhold_sound else sound)

        monkeypatch.setattr(gate_class, "decide", spy)
        seen.clear()
        model = av.seacache()
        with HostReads() as reads:
            sample_av(av, empty_av(av), model=model, steps=6)
        report = model.model_options["transformer_options"]["seacache_settings"].last_run
        gate_reads = sum(site.rsplit(":", 1)[0] == "seacache_core/sea_filter.py" for _, site in reads.reads)
        assert gate_reads == report["calls"] == len(seen)
        return report

    joint = run(withhold_sound=False)
    (keys, video_shape, sound1, sigma1), sound0 = seen[1], seen[0][2]
    assert video_shape[1:] == (48, 3, 4, 4) and sound0.shape == sound1.shape == (len(keys), 8, 10)
    video_only = run(withhold_sound=True)
    filtered = [sea_filter_float32(s, sigma1, SOUND_FILTER_POWER, (2,)) for s in (sound1, sound0)]
    sound_distance = item_distances(*filtered).tolist()
    for item, key in enumerate(keys):
        video = video_only["records"][1]["branches"][str(key)]["distance"]
        both = joint["records"][1]["branches"][str(key)]["distance"]
        assert sound_distance[item] > 0.01 and both == pytest.approx((video + sound_distance[item]) / 2, rel=1e-4)


def test_run_start_refusals(av, tiny):
    """Refused before the first step: a sound latent for a checkpoint without sound, a sound length that does not
    match the prompt's fps, a sound checkpoint without its audio VAE, a plain latent given to Sound Decode, sound
    asked of a checkpoint without an audio VAE."""
    latent = empty_av(av)
    calls = LayerCalls(tiny.model.model.diffusion_model)
    try:
        with pytest.raises(ValueError, match="no sound pathway"):
            sample_av(tiny, latent)
        assert calls.gen == 0
    finally:
        calls.close()
    with pytest.raises(ValueError, match="fps of Cosmos3 Prompt"):
        sample_av(av, empty_av(av, fps=12.0))
    av.model.model.audio_vae_config = None  # what the loader gives a sound checkpoint without sound_tokenizer/
    try:
        with pytest.raises(ValueError, match="ships no sound_tokenizer/"):
            sample_av(av, latent)
    finally:
        av.model.model.audio_vae_config = av.audio_vae.config
    with pytest.raises(ValueError, match="audio-video latent"):
        av.ns.run_node("SeaCacheCosmos3SoundDecode", samples=tiny.empty(), audio_vae=av.audio_vae)
    with pytest.raises(ValueError, match="sound_tokenizer"):
        av.ns.run_node("SeaCacheCosmos3EmptyAVLatent", **SIZE, fps=24.0, batch_size=1, audio_vae=tiny.audio_vae)


def test_sound_rates_that_disagree_are_refused_at_run_start(comfy, tmp_path_factory, av):
    """tiny-sound-hop960: its audio VAE's hop_size 960 (50 sound frames a second) against the transformer's 25.
    Empty AV Latent sizes the sound by hop_size, as diffusers' pipeline does; sampling it is refused before any
    layer runs, naming both rates."""
    from seacache_testing.comfy_runs import load_tiny

    odd = load_tiny(comfy, tmp_path_factory, preset="tiny-sound-hop960")
    latent = empty_av(odd)
    assert latent["samples"].unbind()[1].shape == (1, 8, expected_sound_frames(9, 24.0, hop=960)) == (1, 8, 19)
    calls = LayerCalls(odd.model.model.diffusion_model)
    try:
        with pytest.raises(ValueError, match=r"sound_latent_fps 25\b.* 50 frames a second .*hop_size 960"):
            sample_av(odd, latent)
        assert calls.gen == calls.text == 0
    finally:
        calls.close()


def test_a_rebuilt_model_keeps_the_audio_vae_config(av):
    """ComfyUI rebuilds a model through cached_patcher_init (multi-GPU, non-dynamic delegates): the run-start sound
    checks still see the checkpoint's audio VAE config."""
    factory, args = av.model.cached_patcher_init
    rebuilt = factory(*args, disable_dynamic=True)
    assert rebuilt.model is not av.model.model
    assert rebuilt.model.audio_vae_config == av.model.model.audio_vae_config == av.audio_vae.config is not None


def test_saved_video_has_an_audio_stream(av, tmp_path):
    av_module = pytest.importorskip("av")
    samples = sample_av(av, empty_av(av), steps=2)
    frames = av.ns.run_node("VAEDecode", samples={"samples": samples}, vae=av.vae).outputs[0]
    sound = av.ns.run_node("SeaCacheCosmos3SoundDecode", samples={"samples": samples}, audio_vae=av.audio_vae).outputs[0]
    video = av.ns.run_node("CreateVideo", images=frames, fps=24.0, audio=sound).outputs[0]
    path = str(tmp_path / "clip.mp4")
    video.save_to(path)
    with av_module.open(path) as container:
        assert len(container.streams.video) == 1 and len(container.streams.audio) == 1
        stream = container.streams.audio[0]
        assert stream.rate == 48000 and stream.channels == 2
        decoded = sum(f.samples for f in container.decode(audio=0))
    assert decoded >= int(9 / 24.0 * 48000) * 0.9
