"""The quality proxies (trained Cosmos3-architecture models), the cache options the quality benchmarks compare on
them (``seacache_testing.proxy_jobs``) and the pair statistics they report (``seacache_testing.pair_stats``); the
benchmarks' own runs are in tests/test_benchmarks.py."""

import math
import os

import pytest
import torch

from cosmos3 import Cosmos3Transformer
from seacache_core import SeaCacheConfig, SeaCacheRun, item_distances, sea_filter_float32
from seacache_testing import proxy_av as av
from seacache_testing import proxy_natural as natural
from seacache_testing import quality_proxy as proxy
from seacache_testing.pair_stats import matched, paired_ratio
from seacache_testing.proxy_jobs import SoundJob, UnfilteredIndicator, even_steps


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    return proxy.load_proxy()


def test_proxy_loads_as_the_packs_cosmos3(model):
    assert isinstance(model, Cosmos3Transformer) and model.config == proxy.proxy_config()
    card_path = os.path.join(proxy.PROXY_DIR, proxy.CARD_NAME)
    with open(card_path) as f:
        card = __import__("json").load(f)
    assert card["valid"] and card["data_like"] and card["cfg"] == proxy.CFG and card["seed"] == 0 and card["command"].startswith("python -m benchmarks.train_proxy")
    size = os.path.getsize(os.path.join(proxy.PROXY_DIR, proxy.WEIGHTS_NAME))
    assert size < 4 * 2**20  # small enough to commit


def test_dataset_is_deterministic_and_prompt_dependent():
    a, labels = proxy.make_dataset(32, 5)
    b, _ = proxy.make_dataset(32, 5)
    assert torch.equal(a, b) and a.shape == (32, *proxy.LATENT_SHAPE)
    assert sorted(labels.tolist()) == sorted(list(range(16)) * 2)
    probe = proxy.train_probe(*proxy.make_dataset(1024, 11), epochs=60)
    held_x, held_y = proxy.make_dataset(64, 12)
    assert (probe(proxy.probe_features(held_x)).argmax(1) == held_y).float().mean() > 0.9  # content is learnable


def test_samples_pass_the_validity_bar(model):
    """The committed proxy makes data-like videos of the prompted class: nearest-neighbour distance at most half-way
    to noise and a probe trained on real videos recognising the prompted class in at least 75 % of samples."""
    report = proxy.validity(model, labels=list(range(16)))
    assert report["samples"] == 16
    assert report["noise_nn_ratio"] > 1.5 and report["probe_real_accuracy"] > 0.9  # the metrics see the content
    assert proxy.is_data_like(report), report
    assert proxy.is_valid(report), report


@pytest.fixture(scope="module")
def natural_model():
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    return proxy.load_proxy(proxy.NATURAL.folder, data=proxy.NATURAL)


def test_natural_data_is_photographs_in_motion():
    """Deterministic latent videos of real photos with the spectrum of photographs, real camera motion, and a
    prompt the content decides (photo by nearest neighbour, motion by ``motion_of``)."""
    videos, labels = proxy.NATURAL.dataset(64, 5)
    assert torch.equal(videos, proxy.NATURAL.dataset(64, 5)[0]) and videos.shape == (64, *natural.LATENT_SHAPE)
    assert -2.7 <= natural.spectrum_slope(videos) <= -1.8  # synthetic data: about -3.3
    motion = (videos[:, :, 1:] - videos[:, :, :-1]).pow(2).mean() / videos.var()
    assert motion > 0.25  # frame-difference energy of camera motion over photos
    assert (natural.motion_of(videos) == labels % len(natural.MOTIONS)).float().mean() > 0.9
    stills = proxy.NATURAL.videos(torch.arange(8), torch.Generator().manual_seed(1), frames=1)
    assert stills.shape == (8, *natural.LATENT_SHAPE[:1], 1, *natural.LATENT_SHAPE[2:])
    assert natural.prompt_tokens(0, 1) != natural.prompt_tokens(0) != natural.prompt_tokens(1)


def test_natural_proxy_passes_its_validity_bar(natural_model):
    """Samples as close to real videos as held-out real ones (+0.2), with the data's spectrum slope (+-0.3), and
    the prompted photo and motion recognised in at least half of them (chance 1/32); the same for stills."""
    with open(os.path.join(proxy.NATURAL.folder, proxy.CARD_NAME)) as f:
        card = __import__("json").load(f)
    assert card["valid"] and card["data"] == "natural" and card["cfg"] == natural.CFG
    report = proxy.natural_validity(natural_model, labels=list(range(0, len(natural.CLASSES), 2)))
    assert report["real_prompt_accuracy"] > 0.9 and report["noise_nn_ratio"] > 1.5  # the metrics see the content
    assert natural.is_valid(report), report
    assert natural.is_valid(report, "image_"), report


def test_unfiltered_gate_compares_raw_latents():
    a = proxy.make_dataset(1, 1)[0]  # smooth content
    b = a + 0.3 * torch.randn(a.shape, generator=torch.Generator().manual_seed(1))  # plus fine noise
    distances = {}
    for name in ("sea", "none"):
        gate = SeaCacheRun(SeaCacheConfig(gate="sea", threshold=100.0), [0.6, 0.5, 0.4, 0.3, 0.0])
        if name == "none":
            gate.indicator = UnfilteredIndicator()
        for sigma, latent in zip((0.6, 0.5), (a, b)):
            decision = gate.decide(latent, sigma, ["c"], filter_sigma=0.5)
            gate.commit(decision, torch.zeros(1, 1))
        distances[name] = decision.distance
    assert distances["none"] == pytest.approx(float(item_distances(b, a)), rel=1e-5)
    sea = item_distances(sea_filter_float32(b, 0.5), sea_filter_float32(a, 0.5))
    assert distances["sea"] == pytest.approx(float(sea), rel=1e-5)
    assert distances["sea"] < 0.95 * distances["none"]  # the low-pass SEA view discounts the fine change


def test_even_steps_spread_the_full_calls():
    assert even_steps(35, 19) == {round(i * 34 / 18) for i in range(19)}
    assert len(even_steps(35, 19)) == 19 and {0, 34} <= even_steps(35, 19)


def test_paired_ratio_and_matched_interpolation():
    g, lo, hi, lower = paired_ratio([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    assert (g, lo, hi, lower) == (pytest.approx(0.5), pytest.approx(0.5), pytest.approx(0.5), 3)
    # an exact run (a smoke run's method that computed every step) counts as error 1e-12 instead of dividing by 0
    assert paired_ratio([1e-6, 1e-6], [0.0, 0.0])[:3] == (pytest.approx(1e6),) * 3
    rows = [dict(section="x", gate="sea", order=1, setting=t, full=f, error=e)
            for t, f, e in ((0.1, [12, 20], [0.01, 0.01]), (0.2, [8, 10], [0.04, 0.04]))]
    errors = matched(rows, {"x": 10.0})  # target 10 full calls
    assert errors[("x", "sea", 1)] == pytest.approx([0.02, 0.04])  # log-interpolated; clamped at the nearer run


def test_av_data_is_the_natural_video_with_a_soundtrack_bound_to_its_motion():
    """The audio-video source: the natural proxy's videos (same seed, same video), a sound latent that the fixed
    linear map inverts exactly, and a soundtrack whose motion (balance, loudness, pitch) and timbre (photo) a linear
    classifier hears in held-out clips."""
    (videos, sounds), labels = proxy.AV.dataset(512, 5)
    assert torch.equal(videos, proxy.NATURAL.dataset(512, 5)[0]) and sounds.shape == (512, *av.SOUND_SHAPE)
    assert 0.8 < float(sounds.std()) < 1.25  # about unit scale, as the video latent
    wave = av.decode(sounds)
    assert wave.shape == (512, 2, av.SAMPLES) and torch.allclose(av.encode(wave), sounds, atol=1e-5)
    (held, held_sounds), held_y = proxy.AV.dataset(64, 6)
    motions = len(natural.MOTIONS)
    motion = proxy.fit_linear(av.motion_features(wave), labels % motions, motions)
    timbre = proxy.fit_linear(av.timbre_features(wave), labels // motions, len(natural.PHOTOS))
    held_wave = av.decode(held_sounds)
    assert (motion(av.motion_features(held_wave)).argmax(1) == held_y % motions).float().mean() > 0.9
    assert (timbre(av.timbre_features(held_wave)).argmax(1) == held_y // motions).float().mean() > 0.9
    pan_right = held_y % motions == natural.MOTIONS.index("pan right")
    energy = held_wave.pow(2)
    late_right = energy[:, 1, -100:].sum(1) / energy[:, :, -100:].sum((1, 2))
    assert (late_right[pan_right] > 0.7).all() and (late_right[~pan_right] < 0.7).all()  # ends on the right
    assert proxy.AV.clips(torch.arange(2), torch.Generator().manual_seed(0), frames=1)[1] is None  # stills: silent


def test_sound_metrics():
    wave = av.decode(torch.randn(2, *av.SOUND_SHAPE, generator=torch.Generator().manual_seed(0)))
    assert torch.allclose(av.snr_db(wave * 1.1, wave), torch.full((2,), 20.0), atol=1e-3)  # noise 0.1 of the signal
    assert float(av.log_spectral_distance(wave, wave).abs().max()) == 0.0
    assert torch.allclose(av.log_spectral_distance(2 * wave, wave), torch.full((2,), 20 * math.log10(2)), atol=1e-3)


@pytest.fixture(scope="module")
def av_model():
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    return proxy.load_proxy(proxy.AV.folder, data=proxy.AV)


def test_av_proxy_passes_its_validity_bar(av_model):
    """A fresh evaluation of the committed audio-video proxy (one sample per prompt): its video passes the
    natural proxy's bar, its sound lies at most half-way from real sounds to noise, and the prompted motion and
    photo are heard in at least twice chance of the samples."""
    with open(os.path.join(proxy.AV.folder, proxy.CARD_NAME)) as f:
        card = __import__("json").load(f)
    assert card["valid"] and card["data"] == "av" and card["cfg"] == av.CFG and av_model.config.sound_gen
    assert os.path.getsize(os.path.join(proxy.AV.folder, proxy.WEIGHTS_NAME)) < 4 * 2**20
    report = proxy.av_validity(av_model)  # one sample per prompt (every other prompt would leave out two motions)
    assert report["sound_real_motion_accuracy"] > 0.9 and report["sound_real_photo_accuracy"] > 0.9
    assert report["sound_noise_nn_ratio"] > 1.2  # the sound metric tells noise from sound
    assert av.is_valid(report), report


def test_easycache_rule_at_threshold_zero_is_the_uncached_run(av_model):
    """The benchmark's EasyCache re-implementation never skips at threshold 0 and then changes nothing; at a high
    threshold it skips inside its window only."""
    job = SoundJob(av_model, proxy.AV, 5.0, 8)
    video, sound = job.sample(0)
    full, (video0, sound0) = job.run(0, "easycache", 1, 0.0)
    assert full == 8 and torch.equal(video0, video) and torch.equal(sound0, sound)
    full, (video1, sound1) = job.run(0, "easycache", 1, 10.0)
    assert 3 <= full < 8 and not torch.equal(sound1, sound)


def test_joint_gate_without_sound_weight_is_the_video_gate(av_model):
    job = SoundJob(av_model, proxy.AV, 5.0, 10)
    job.sound_weight = 0.0
    video_gate, joint = job.run(1, "video", 1, 0.3), job.run(1, "joint", 1, 0.3)
    assert video_gate[0] == joint[0] < 10 and torch.equal(video_gate[1][1], joint[1][1])
    job.sound_weight = 1.0
    full, (_, sound) = job.run(1, "joint", 1, 0.3)
    assert full != video_gate[0] and not torch.equal(sound, video_gate[1][1])  # the sound's distance decides too
