"""The quality proxies: small models of this pack's Cosmos3 architecture trained on latent videos of one data
source, and everything the benchmarks and the tests need of them (data sources, configs, prompts, loading, the
sampler, validity checks, the trainer).

No trained Cosmos3 weights can run here, and random weights say nothing about quality, so SeaCache's effect on
a video is measured on proxies instead: ``cosmos3.Cosmos3Transformer`` itself (text pathway, generator stack,
``norm_moe_gen``, patching, mRoPE) at a tiny size, trained by flow matching on one of several deterministic data
sources: ``synthetic``, latent videos whose content the prompt decides (which object, its colour
and its direction of motion) over smooth, slowly drifting backgrounds; ``natural``, camera pans and zooms over
real photographs (``proxy_natural``); ``av``, the natural videos with a soundtrack bound to the camera's motion,
denoised together through the ``sound_gen`` pathway (``proxy_av``). They are *not* Cosmos3-Nano: their numbers show how the cache options
compare on a trained denoiser of this architecture, not what Cosmos3-Nano's videos will look like. A second
architecture: ``wan_natural`` trains ComfyUI's own Wan 2.1 ``WanModel`` (tiny, through ``proxy_wan.WanProxy``) on
the natural videos with 16 latent channels; it needs ``COMFYUI_PATH``.

The trained weights and their cards are data under ``benchmarks/`` (``proxy/``, ``proxy_natural/``, ``proxy_av/``,
``proxy_wan_natural/``); ``python -m benchmarks.train_proxy`` trains them (its docstring has the commands).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import signal
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from cosmos3 import Cosmos3Config, Cosmos3Transformer, reference_sigmas
from seacache_testing import proxy_av as av
from seacache_testing import proxy_natural as natural
from seacache_testing import proxy_wan

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROXY_DIR = os.path.join(ROOT, "benchmarks", "proxy")
WEIGHTS_NAME = "proxy.safetensors"
CARD_NAME = "proxy.json"

# ----------------------------------------------------------------------------------------------- vocabulary
WORDS = ["<pad>", "<bos>", "<eos>", "<null>", "a", "moving", "red", "blue", "ball", "square",
         "left", "right", "up", "down"]
TOKEN = {w: i for i, w in enumerate(WORDS)}
COLOURS, SHAPES, DIRECTIONS = ("red", "blue"), ("ball", "square"), ("left", "right", "up", "down")
CLASSES = [(c, s, d) for c in COLOURS for s in SHAPES for d in DIRECTIONS]  # 16 prompts
PROMPT_LENGTH = 7
FPS = 24.0
CFG = 1.5  # guidance of the proxy's runs: at CFG 5 this small model oversaturates (sample std ~2x the data's)

# Latent layout: [B, C, T, H, W]; the model patches 2x2, so 9 x 8 x 8 = 576 generator tokens.
LATENT_SHAPE = (4, 9, 16, 16)
CHANNEL_SIGNATURE = {  # per-channel amplitude of each colour (a "VAE latent" of the object)
    "red": (1.6, -0.6, 0.9, 0.2),
    "blue": (-0.5, 1.5, 0.3, -1.0),
}
DIRECTION_VECTOR = {"left": (0.0, -1.0), "right": (0.0, 1.0), "up": (-1.0, 0.0), "down": (1.0, 0.0)}
SPEED = 0.9  # latent pixels per frame


def proxy_config() -> Cosmos3Config:
    """The proxy's architecture: Cosmos3 with hidden 48, 3 layers, 4 query / 2 key-value heads of 12."""
    return Cosmos3Config(
        hidden_size=48, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=12,
        intermediate_size=144, vocab_size=len(WORDS), latent_channel=LATENT_SHAPE[0],
        patch_latent_dim=LATENT_SHAPE[0] * 4, rope_theta=100.0, rope_axes_dim=(2, 2, 2),
    )


def prompt_tokens(label: int | None) -> list[int]:
    """Token ids of class ``label``'s prompt ("a red ball moving left"), or of the empty prompt for None."""
    if label is None:
        return [TOKEN["<bos>"]] + [TOKEN["<null>"]] * (PROMPT_LENGTH - 2) + [TOKEN["<eos>"]]
    colour, shape, direction = CLASSES[label]
    words = ["<bos>", "a", colour, shape, "moving", direction, "<eos>"]
    return [TOKEN[w] for w in words]


# ----------------------------------------------------------------------------------------------- dataset
def make_videos(labels: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Synthetic latent videos [B, C, T, H, W] for class ``labels``, drawn with ``generator`` (deterministic).

    Each video: a smooth background (a few low-frequency waves per channel, drifting slowly in time) and one
    object whose colour (channel signature), shape (soft disc or soft square, with a faint texture) and
    direction of motion come from the prompt; start position, phase and background are random per video."""
    c, t, h, w = LATENT_SHAPE
    b = labels.shape[0]
    yy = torch.arange(h, dtype=torch.float32).view(1, 1, h, 1)
    xx = torch.arange(w, dtype=torch.float32).view(1, 1, 1, w)
    tt = torch.arange(t, dtype=torch.float32).view(1, t, 1, 1)
    # background: 3 waves per channel, spatial frequency <= 1.5 cycles per frame, slow drift
    background = torch.zeros(b, c, t, h, w)
    for _ in range(3):
        fy, fx = (torch.rand(2, b, c, generator=generator) * 3.0 - 1.5) / h
        phase = torch.rand(b, c, generator=generator) * 2 * math.pi
        drift = (torch.rand(b, c, generator=generator) - 0.5) * 0.3
        amp = 0.08 + 0.08 * torch.rand(b, c, generator=generator)
        arg = 2 * math.pi * (fy[..., None, None, None] * yy.unsqueeze(0) + fx[..., None, None, None] * xx.unsqueeze(0))
        background += amp[..., None, None, None] * torch.cos(arg + phase[..., None, None, None] + drift[..., None, None, None] * tt.unsqueeze(0))
    background += 0.15 * torch.randn(b, c, 1, 1, 1, generator=generator)
    # object
    jitter = (torch.rand(b, 2, generator=generator) - 0.5) * 5.0
    videos = background
    for i, label in enumerate(labels.tolist()):
        colour, shape, direction = CLASSES[label]
        dy, dx = DIRECTION_VECTOR[direction]
        cy = (h - 1) / 2 + jitter[i, 0] + dy * SPEED * (tt.view(t, 1, 1) - (t - 1) / 2)
        cx = (w - 1) / 2 + jitter[i, 1] + dx * SPEED * (tt.view(t, 1, 1) - (t - 1) / 2)
        ry, rx = yy.view(1, h, 1) - cy, xx.view(1, 1, w) - cx
        if shape == "ball":
            mask = torch.exp(-(ry**2 + rx**2) / (2 * 2.2**2))
        else:
            mask = torch.sigmoid((3.0 - ry.abs()) * 2.5) * torch.sigmoid((3.0 - rx.abs()) * 2.5)
        texture = 1.0 + 0.25 * torch.cos(1.9 * ry) * torch.cos(1.9 * rx)
        signature = torch.tensor(CHANNEL_SIGNATURE[colour]).view(c, 1, 1, 1)
        videos[i] = videos[i] * (1 - 0.9 * mask) + signature * (mask * texture)
    return 2.0 * videos  # overall std about 0.7, near the unit scale of real normalised latents


def make_dataset(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` synthetic videos with balanced labels from ``seed``: (videos [N, C, T, H, W], labels [N])."""
    return SYNTHETIC.dataset(count, seed)


TRAIN_SEED, HELDOUT_SEED, REFERENCE_SEED, PROBE_SEED = 1000, 2000, 3000, 4000


@dataclass(frozen=True)
class ProxyData:
    """One proxy's data source: what the trainer, the sampler and the benchmark need to know of it.

    ``make_videos(labels, generator, frames)`` draws latent videos of class ``labels`` ([B] ints), for a source
    with ``sound_shape`` (sound latent channels, frames) the pair (videos, sound latents or None for stills);
    ``prompt_tokens(label, frames)`` gives a class's prompt (None: the empty prompt); ``image_every`` > 0 makes
    every n-th training batch single-frame stills (the proxy then also serves as an image model). ``build(config)``
    makes the model; ``weight_files`` maps each weights file to the state-dict prefix of the keys it holds (the
    prefix stripped on disk); ``i2v_share``: the share of training items with a clean first frame (0 for a model
    that ignores ``cond_latent``); ``what``: the card's description, formatted with ``{data}``."""

    name: str
    folder: str
    config: Callable[[], Cosmos3Config]
    latent_shape: tuple[int, int, int, int]
    classes: int
    make_videos: Callable[..., torch.Tensor]
    prompt_tokens: Callable[..., list[int]]
    cfg: float
    image_every: int = 0
    sound_shape: tuple[int, int] | None = None
    build: Callable = Cosmos3Transformer
    weight_files: tuple[tuple[str, str], ...] = ((WEIGHTS_NAME, ""),)
    i2v_share: float = 0.3
    what: str = "cosmos3.Cosmos3Transformer trained on {data} latent videos (not Cosmos3-Nano)"

    def token_batch(self, labels, frames: int | None = None) -> torch.Tensor:
        """[B, L] token ids for a list of labels (None = the empty prompt used for CFG)."""
        frames = self.latent_shape[1] if frames is None else frames
        return torch.tensor([self.prompt_tokens(label, frames) for label in labels], dtype=torch.long)

    def videos(self, labels: torch.Tensor, generator: torch.Generator, frames: int | None = None):
        """Latent videos [B, C, T, H, W] of class ``labels`` (``frames`` None: the source's own length); with
        ``sound_shape`` the pair (videos, sound latents [B, C_s, T_s] or None for stills)."""
        frames = self.latent_shape[1] if frames is None else frames
        return self.make_videos(labels, generator, frames)

    def clips(self, labels: torch.Tensor, generator: torch.Generator, frames: int | None = None):
        """(videos, sound latents) of class ``labels`` for every source: sound None without ``sound_shape``."""
        out = self.videos(labels, generator, frames)
        return out if self.sound_shape else (out, None)

    def dataset(self, count: int, seed: int, frames: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``count`` videos (with ``sound_shape``: (videos, sounds)) with balanced labels from ``seed``: (videos
        [N, C, T, H, W], labels [N])."""
        generator = torch.Generator().manual_seed(seed)
        labels = torch.arange(count) % self.classes
        labels = labels[torch.randperm(count, generator=generator)]
        return self.videos(labels, generator, frames), labels


def natural_config() -> Cosmos3Config:
    """The natural proxy's architecture: Cosmos3 with hidden 64, 3 layers, 4 query / 2 key-value heads of 16."""
    return Cosmos3Config(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        intermediate_size=192, vocab_size=len(natural.WORDS), latent_channel=natural.CHANNELS,
        patch_latent_dim=natural.CHANNELS * 4, rope_theta=100.0, rope_axes_dim=(2, 3, 3),
    )


SYNTHETIC = ProxyData(
    "synthetic", PROXY_DIR, proxy_config, LATENT_SHAPE, len(CLASSES),
    lambda labels, generator, frames: make_videos(labels, generator), lambda label, frames: prompt_tokens(label), CFG,
)
NATURAL = ProxyData(
    "natural", os.path.join(ROOT, "benchmarks", "proxy_natural"), natural_config, natural.LATENT_SHAPE,
    len(natural.CLASSES), natural.make_videos, natural.prompt_tokens, natural.CFG, image_every=4,
)


def av_config() -> Cosmos3Config:
    """The audio-video proxy's architecture: the natural proxy's with the sound pathway (``sound_gen``, 64 sound
    latent channels at 25 frames a second)."""
    return dataclasses.replace(natural_config(), sound_gen=True, sound_dim=av.SOUND_DIM, sound_latent_fps=av.SOUND_FPS)


AV = ProxyData(
    "av", os.path.join(ROOT, "benchmarks", "proxy_av"), av_config, natural.LATENT_SHAPE, len(natural.CLASSES),
    av.make_clips, natural.prompt_tokens, av.CFG, sound_shape=av.SOUND_SHAPE,
)
WAN_NATURAL = ProxyData(
    "wan_natural", proxy_wan.FOLDER, proxy_wan.WanProxyConfig, proxy_wan.LATENT_SHAPE, len(natural.CLASSES),
    functools.partial(natural.make_videos, channels=proxy_wan.WAN_CHANNELS), natural.prompt_tokens, proxy_wan.CFG,
    image_every=4, build=proxy_wan.WanProxy, i2v_share=0.0,
    weight_files=((proxy_wan.WEIGHTS_NAME, "diffusion_model."), (proxy_wan.TEXT_NAME, "text_embedding.")),
    what="ComfyUI's comfy.ldm.wan.model.WanModel (Wan 2.1 T2V, tiny) trained on {data} latent videos in Wan's "
         "model space (not Wan 2.1)",
)
SOURCES = {data.name: data for data in (SYNTHETIC, NATURAL, AV, WAN_NATURAL)}


# ----------------------------------------------------------------------------------------------- sampling
def load_proxy(folder: str = PROXY_DIR, dtype=torch.float32, data: ProxyData = SYNTHETIC) -> torch.nn.Module:
    """The trained proxy of ``data`` from ``folder`` (bf16 weights on disk, run in ``dtype``, eval mode)."""
    from safetensors.torch import load_file

    state = {}
    for name, prefix in data.weight_files:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"proxy weights not found at {path}; run python -m benchmarks.train_proxy to make them")
        state.update({prefix + k: v.to(dtype) for k, v in load_file(path).items()})
    model = data.build(data.config())
    model.load_state_dict(state, strict=True)
    return model.to(dtype).eval()


def sample(model, label: int, seed: int, steps: int = 35, shift: float = 3.0, cfg: float | None = None,
           first_frame: torch.Tensor | None = None, stack=None, data: ProxyData = SYNTHETIC,
           frames: int | None = None) -> torch.Tensor:
    """One video [1, C, T, H, W] of class ``label`` by the flow Euler sampler with CFG (cond and uncond in one
    call; ``cfg`` None: the source's), from noise seeded by ``seed``. ``first_frame`` [1, C, 1, H, W] makes it
    image-to-video (frame 0 kept clean); ``frames=1`` makes a still image. ``stack`` replaces the model's stack
    seam for this run (a SeaCache host), None runs it plainly. A source with sound samples it too (see
    :func:`sample_av`)."""
    return sample_av(model, label, seed, steps, shift, cfg, first_frame, stack, data, frames)[0]


def sample_av(model, label: int, seed: int, steps: int = 35, shift: float = 3.0, cfg: float | None = None,
              first_frame: torch.Tensor | None = None, stack=None, data: ProxyData = SYNTHETIC,
              frames: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(video [1, C, T, H, W], sound latent [1, C_s, T_s]) as :func:`sample`, the sound denoised with the video
    (same steps and CFG) when the source has ``sound_shape`` and the clip more than one frame, else None. The
    sound's noise is drawn after the video's from the same seed, so the video's noise is the same either way.
    ``model`` may be any callable with the transformer's signature (a cache wrapping the whole call)."""
    c, t, h, w = data.latent_shape
    t = t if frames is None else frames
    cfg = data.cfg if cfg is None else cfg
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(1, c, t, h, w, generator=generator)
    sound = torch.randn(1, *data.sound_shape, generator=generator) if data.sound_shape and t > 1 else None
    sigmas = reference_sigmas(steps, shift)
    tokens = data.token_batch([label, None], t)
    cond_latent = cond_mask = None
    if first_frame is not None:
        cond_latent = torch.zeros(1, c, t, h, w)
        cond_latent[:, :, :1] = first_frame
        cond_mask = torch.zeros(1, t)
        cond_mask[:, 0] = 1
    from cosmos3 import TEXT_KV_CACHE_KEY, TextKVCache

    options = {TEXT_KV_CACHE_KEY: TextKVCache()}
    if stack is not None:
        model.call_gen_stack = stack
    x = noise
    guided = lambda v: v[1:] + cfg * (v[:1] - v[1:])  # noqa: E731
    try:
        with torch.no_grad():
            for i in range(steps):
                v = model(x.expand(2, -1, -1, -1, -1), sigmas[i].expand(2), tokens, fps=FPS,
                          cond_latent=cond_latent, cond_mask=cond_mask, transformer_options=options,
                          sound=None if sound is None else sound.expand(2, -1, -1))
                if sound is not None:
                    v, v_sound = v
                    sound = sound + (sigmas[i + 1] - sigmas[i]) * guided(v_sound)
                x = x + (sigmas[i + 1] - sigmas[i]) * guided(v)
    finally:
        if stack is not None:
            del model.call_gen_stack
    if first_frame is not None:
        x = x.clone()
        x[:, :, :1] = first_frame
    return x, sound


# ----------------------------------------------------------------------------------------------- validity
def probe_features(videos: torch.Tensor) -> torch.Tensor:
    """Features of the linear probe: the video minus a 7x7 spatial blur (removes the smooth background),
    and its magnitude, each average-pooled 4x4 in space, flattened per item."""
    frames = videos.flatten(0, 1).unsqueeze(1)
    blur = F.avg_pool3d(F.pad(frames, (3, 3, 3, 3, 0, 0), mode="replicate"), (1, 7, 7), stride=1)
    detail = (frames - blur).view_as(videos)
    return torch.cat([F.avg_pool3d(detail, (1, 4, 4)).flatten(1), F.avg_pool3d(detail.abs(), (1, 4, 4)).flatten(1)], 1)


def train_probe(videos: torch.Tensor, labels: torch.Tensor, epochs: int = 150) -> torch.nn.Linear:
    """A linear (softmax) classifier of the class from probe features, fitted by full-batch L-BFGS."""
    return fit_linear(probe_features(videos), labels, len(CLASSES), epochs)


def fit_linear(feats: torch.Tensor, labels: torch.Tensor, classes: int, epochs: int = 150) -> torch.nn.Linear:
    """A linear softmax classifier of ``labels`` from features [N, F], fitted by full-batch L-BFGS (seeded)."""
    torch.manual_seed(PROBE_SEED)
    probe = torch.nn.Linear(feats.shape[1], classes)
    opt = torch.optim.LBFGS(probe.parameters(), lr=0.5, max_iter=epochs, history_size=20)

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(probe(feats), labels) + 1e-3 * probe.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return probe


def nearest_distance(videos: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """RMS distance from each video to its nearest neighbour in ``reference``. [N]"""
    return natural.nearest(videos, reference)[0]


def validity(model, labels: list[int] | None = None, steps: int = 35, shift: float = 3.0, cfg: float = CFG) -> dict:
    """How data-like the proxy's samples are, against held-out data of the same generator.

    ``nn_ratio``: median nearest-neighbour distance of generated videos to a held-out reference set, divided
    by the same for real held-out videos (1 = as close as real data). Baselines: Gaussian noise of the data's
    mean and std (``noise_nn_ratio``), and real videos against the reference videos of the *other* classes
    only (``wrong_class_nn_ratio``: what a sample of the wrong content scores). ``probe_accuracy``: a linear
    probe trained on real videos classifies the generated ones as their prompt's class (chance 1/16);
    ``probe_real_accuracy`` on held-out real videos. ``labels``: the prompts sampled (default: every class
    twice), one seed each.
    """
    labels = labels if labels is not None else [k for k in range(len(CLASSES)) for _ in range(2)]
    reference, reference_y = make_dataset(1024, REFERENCE_SEED)
    train_x, train_y = make_dataset(2048, TRAIN_SEED + 7)
    real_x, real_y = make_dataset(len(labels), HELDOUT_SEED)
    probe = train_probe(train_x, train_y)
    generated = torch.cat([sample(model, k, seed=50_000 + i, steps=steps, shift=shift, cfg=cfg)
                           for i, k in enumerate(labels)])
    labels = torch.tensor(labels)
    noise = reference.mean() + reference.std() * torch.randn(real_x.shape, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        real_nn = nearest_distance(real_x, reference).median()
        wrong = torch.cat([nearest_distance(real_x[i : i + 1], reference[reference_y != real_y[i]])
                           for i in range(len(real_y))])
        acc_gen = (probe(probe_features(generated)).argmax(1) == labels).float().mean()
        acc_real = (probe(probe_features(real_x)).argmax(1) == real_y).float().mean()
    per_item = nearest_distance(generated, reference)
    return {
        "samples": len(labels),
        "nn_ratio": float(per_item.median() / real_nn),
        "noise_nn_ratio": float(nearest_distance(noise, reference).median() / real_nn),
        "wrong_class_nn_ratio": float(wrong.median() / real_nn),
        "real_nn": float(real_nn),
        "probe_accuracy": float(acc_gen),
        "probe_real_accuracy": float(acc_real),
        "chance": 1.0 / len(CLASSES),
    }


VALID_PROBE_ACCURACY = 0.75


def natural_validity(model, steps: int = 35, shift: float = 5.0, cfg: float | None = None, labels: list[int] | None = None,
                     data: ProxyData = NATURAL) -> dict:
    """How data-like the natural proxy's samples are, against held-out photo videos (one sample per prompt;
    ``data``: a source of the natural videos, e.g. ``WAN_NATURAL``'s 16 channels; ``cfg`` None: the source's).

    ``nn_ratio``: median nearest-neighbour distance of generated videos to a reference set of 1024 real videos,
    divided by the same for 32 held-out real videos (``noise_nn_ratio``: Gaussian noise of the data's mean and
    std). ``slope`` / ``data_slope``: spectrum slope of generated and real videos. ``prompt_accuracy``: the
    prompt is recognised when the nearest reference video shows the prompted photo and ``motion_of`` finds the
    prompted motion (``real_prompt_accuracy`` on held-out real videos; chance 1/32), and ``photo_accuracy`` /
    ``motion_accuracy`` each part alone (chance 1/8 and 1/4). The ``image_`` entries do
    the same for single-frame stills (one per photo, photo only; chance 1/8). ``labels``: the video prompts
    sampled (default: every class once)."""
    cfg = data.cfg if cfg is None else cfg

    def report(frames: int, labels: list[int]) -> dict:
        reference, reference_y = data.dataset(1024, 3000, frames)
        real, real_y = data.dataset(len(labels), 2000, frames)
        generated = torch.cat([sample(model, k, seed=50_000 + i, steps=steps, shift=shift, cfg=cfg, data=data, frames=frames)
                               for i, k in enumerate(labels)])
        return natural.video_report(generated, torch.tensor(labels), reference, reference_y, real, real_y)

    video = report(natural.FRAMES, list(range(len(natural.CLASSES))) if labels is None else labels)
    image = report(1, [p * len(natural.MOTIONS) for p in range(len(natural.PHOTOS))])
    return {**video, "chance": 1 / len(natural.CLASSES), "shift": shift, "cfg": cfg, "steps": steps,
            **{f"image_{k}": v for k, v in image.items()}, "image_chance": 1 / len(natural.PHOTOS)}


def av_validity(model, steps: int = 35, shift: float = 5.0, cfg: float = av.CFG,
                labels: list[int] | None = None) -> dict:
    """How data-like the audio-video proxy's samples are (one sample per prompt), its video as the natural proxy's
    (:func:`proxy_natural.video_report`) plus its sound:

    ``sound_nn_ratio``: median nearest-neighbour distance of generated sound latents to 1024 reference ones over
    the same for held-out real sounds (``sound_noise_nn_ratio``: Gaussian noise). ``sound_motion_accuracy``: a
    linear classifier of the camera motion from the decoded sound (:func:`proxy_av.motion_features`, trained on
    2048 real clips) finds the prompted motion (chance 1/4; ``sound_real_motion_accuracy`` on held-out real clips).
    ``av_agreement``: that motion equals the one ``motion_of`` recognises in the same sample's video;
    ``av_agreement_chance``: the agreement two independent recognisers with these two label frequencies reach.
    ``sound_photo_accuracy``: a linear classifier of the photo from the sound's timbre
    (:func:`proxy_av.timbre_features`) finds the prompted one (chance 1/8)."""
    labels = list(range(len(natural.CLASSES))) if labels is None else labels
    (reference, reference_s), reference_y = AV.dataset(1024, 3000)
    (real, real_s), real_y = AV.dataset(len(labels), 2000)
    (train, train_s), train_y = AV.dataset(2048, 1007)
    pairs = [sample_av(model, k, seed=50_000 + i, steps=steps, shift=shift, cfg=cfg, data=AV)
             for i, k in enumerate(labels)]
    generated, generated_s = torch.cat([p[0] for p in pairs]), torch.cat([p[1] for p in pairs])
    y = torch.tensor(labels)
    report = natural.video_report(generated, y, reference, reference_y, real, real_y)
    motions, photos = len(natural.MOTIONS), len(natural.PHOTOS)
    motion_probe = fit_linear(av.motion_features(av.decode(train_s)), train_y % motions, motions)
    photo_probe = fit_linear(av.timbre_features(av.decode(train_s)), train_y // motions, photos)
    with torch.no_grad():
        heard = motion_probe(av.motion_features(av.decode(generated_s))).argmax(1)
        seen = natural.motion_of(generated)
        real_heard = motion_probe(av.motion_features(av.decode(real_s))).argmax(1)
        timbre = photo_probe(av.timbre_features(av.decode(generated_s))).argmax(1)
        real_timbre = photo_probe(av.timbre_features(av.decode(real_s))).argmax(1)
    noise = reference_s.mean() + reference_s.std() * torch.randn(real_s.shape, generator=torch.Generator().manual_seed(9))
    real_d = natural.nearest(real_s, reference_s)[0].median()
    share = lambda v: torch.bincount(v, minlength=motions).float() / len(v)  # noqa: E731
    return {
        **report, "chance": 1 / len(natural.CLASSES), "shift": shift, "cfg": cfg, "steps": steps,
        "sound_nn_ratio": float(natural.nearest(generated_s, reference_s)[0].median() / real_d),
        "sound_noise_nn_ratio": float(natural.nearest(noise, reference_s)[0].median() / real_d),
        "sound_motion_accuracy": float((heard == y % motions).float().mean()),
        "sound_real_motion_accuracy": float((real_heard == real_y % motions).float().mean()),
        "av_agreement": float((heard == seen).float().mean()),
        "av_agreement_chance": float((share(heard) * share(seen)).sum()),
        "sound_photo_accuracy": float((timbre == y // motions).float().mean()),
        "sound_real_photo_accuracy": float((real_timbre == real_y // motions).float().mean()),
        "sound_std": float(generated_s.std()),
        "sound_data_std": float(reference_s.std()),
    }


def is_data_like(report: dict) -> bool:
    """Generated videos sit at most half-way from real data (nearest-neighbour ratio 1) to the noise baseline."""
    return report["nn_ratio"] <= 1.0 + 0.5 * (report["noise_nn_ratio"] - 1.0)


def is_valid(report: dict) -> bool:
    """The full validity bar: data-like, and the prompt's class recognised in at least 75 % of the samples."""
    return is_data_like(report) and report["probe_accuracy"] >= VALID_PROBE_ACCURACY


VALIDITY = {"synthetic": validity, "natural": natural_validity, "av": av_validity,
            "wan_natural": functools.partial(natural_validity, data=WAN_NATURAL)}
VALID_BAR = {"synthetic": is_valid, "natural": natural.is_valid, "av": av.is_valid, "wan_natural": natural.is_valid}


# ----------------------------------------------------------------------------------------------- training
def train_sigmas(batch: int, generator: torch.Generator) -> torch.Tensor:
    """Training noise levels: half uniform, half shifted by 3 towards high noise (as the samplers use)."""
    u = torch.rand(batch, generator=generator)
    shifted = 3 * u / (1 + 2 * u)
    return torch.where(torch.arange(batch) % 2 == 0, u, shifted).clamp(1e-3, 1 - 1e-3)


def train(steps: int, batch: int, lr: float, seed: int, stop_after: int | None = None, log_every: int = 50,
          data: ProxyData = SYNTHETIC, checkpoint: Callable[[Cosmos3Transformer, int], None] | None = None,
          checkpoint_every: int = 200, init: Cosmos3Transformer | None = None):
    """Flow-matching training (velocity target noise - data) over a schedule of ``steps`` steps, with 10 %
    empty prompts (for CFG) and ``data.i2v_share`` image-to-video items (clean first frame, no loss there); fresh videos of
    ``data`` every step (every ``data.image_every``-th batch single-frame stills), deterministic from ``seed``.
    Stops early after ``stop_after`` steps, or at the step where SIGUSR1 arrives (then ``--stop-after`` with
    the printed count reproduces the run). ``checkpoint(ema_model, step)`` is called every ``checkpoint_every``
    steps. A source with sound trains the sound velocity too (its own noise, the same sigma; the two streams' mean
    squared errors summed). ``init``: start from this trained proxy's weights (parameters the source's
    architecture adds, such as the sound pathway, start as initialised). Returns the EMA weights' model and the
    number of steps run."""
    stop = {"now": False}
    signal.signal(signal.SIGUSR1, lambda *_: stop.update(now=True))
    torch.manual_seed(seed)
    model = data.build(data.config())
    if init is not None:
        missing, unexpected = model.load_state_dict(init.state_dict(), strict=False)
        if unexpected or any(not k.startswith("audio_") for k in missing):
            raise ValueError(f"--init weights do not fit the {data.name} architecture: missing {missing}, unexpected {unexpected}")
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.99))
    generator = torch.Generator().manual_seed(TRAIN_SEED + seed)
    start, step, ema_loss = time.time(), 0, None
    ema = {k: v.detach().clone() for k, v in model.state_dict().items()}
    channels, _, height, width = data.latent_shape

    def ema_model():
        copy = data.build(data.config())
        copy.load_state_dict(ema)
        return copy.eval()

    while step < min(steps, stop_after or steps) and not stop["now"]:
        progress = step / steps
        for group in opt.param_groups:  # warm-up, then cosine decay over the steps
            group["lr"] = lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        frames = 1 if data.image_every and step % data.image_every == data.image_every - 1 else data.latent_shape[1]
        labels = torch.randint(0, data.classes, (batch,), generator=generator)
        x0, s0 = data.clips(labels, generator, frames)
        eps = torch.randn(x0.shape, generator=generator)
        sigma = train_sigmas(batch, generator)
        xt = (1 - sigma.view(-1, 1, 1, 1, 1)) * x0 + sigma.view(-1, 1, 1, 1, 1) * eps
        if s0 is not None:
            eps_s = torch.randn(s0.shape, generator=generator)
            st = (1 - sigma.view(-1, 1, 1)) * s0 + sigma.view(-1, 1, 1) * eps_s
        drop = torch.rand(batch, generator=generator) < 0.1
        tokens = data.token_batch([None if d else int(k) for d, k in zip(drop.tolist(), labels.tolist())], frames)
        i2v = (torch.rand(batch, generator=generator) < data.i2v_share) & (frames > 1)
        cond_mask = torch.zeros(batch, frames)
        cond_mask[:, 0] = i2v.float()
        v = model(xt, sigma, tokens, fps=FPS, cond_latent=x0, cond_mask=cond_mask, sound=None if s0 is None else st)
        if s0 is not None:
            v, v_sound = v
        weight = 1.0 - cond_mask[:, None, :, None, None]
        loss = (((v - (eps - x0)) ** 2) * weight).sum() / (weight.sum() * channels * height * width)
        if s0 is not None:
            loss = loss + (v_sound - (eps_s - s0)).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        with torch.no_grad():
            decay = min(0.995, (1 + step) / (10 + step))
            for k, p in model.state_dict().items():
                ema[k].mul_(decay).add_(p.detach(), alpha=1 - decay)
        loss = loss.item()
        ema_loss = loss if ema_loss is None else 0.98 * ema_loss + 0.02 * loss
        step += 1
        if step % log_every == 0:
            print(f"step {step:5d}  {time.time() - start:6.0f} s  loss {ema_loss:.4f}  lr {opt.param_groups[0]['lr']:.2e}", flush=True)
        if checkpoint is not None and step % checkpoint_every == 0:
            checkpoint(ema_model(), step)
    return ema_model(), step


def save_proxy(model, folder: str, card: dict, data: ProxyData = SYNTHETIC) -> None:
    """Write the weights (bf16 safetensors, one file per ``data.weight_files`` entry) and the JSON card (seed,
    command, validity) to ``folder``."""
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    for name, prefix in data.weight_files:
        save_file({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}, os.path.join(folder, name))
    with open(os.path.join(folder, CARD_NAME), "w") as f:
        json.dump(card, f, indent=2)
        f.write("\n")
