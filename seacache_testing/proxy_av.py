"""Audio-video data for the audio-video quality proxy: the natural proxy's camera pans and zooms with a soundtrack
bound to the camera's motion, and the fixed, exactly invertible linear map that makes its sound latent.

The video of an item is the natural proxy's (``proxy_natural``: same photos, prompts, windows and latent; the same
seed gives the same video). Its stereo soundtrack follows the same camera windows, frame by frame:

- pitch: a harmonic tone whose fundamental is the photo's (``TIMBRE``, +-3 % per item) times ``middle side /
  side``, so a zoom in glides up (about 0.6 octave over the clip) and a zoom out down, a pan keeps its pitch;
- loudness: ``(middle side / side) ** 0.5`` times ``80 / middle side``: the tone swells as the camera moves in and
  fades as it moves out, and a close shot (small window) is louder than a wide one (0.83x to 1.25x);
- stereo balance: ``tanh(5 * (x - middle x) / middle side)``, equal-power: a pan right moves the sound from the
  left to the right channel, a pan left the other way, a zoom stays centred;
- timbre, per photo (the prompt's noun): the fundamental's register, the harmonics' roll-off, the weight of the
  even harmonics and a noise band (random per item and frame).

The clip lasts the video's 17 frames at 24 fps; the waveform runs at ``SAMPLE_RATE`` = 800 Hz (``HOP`` = 32 samples
a sound latent frame, 25 frames a second: Cosmos3's ``sound_latent_fps``), sized as diffusers sizes a clip's sound
(18 frames). Sound latent ``[SOUND_DIM = 64, 18]``: each frame's mid and side signals ((L +- R) / sqrt 2) as the
coefficients of an orthonormal DCT-II of ``HOP`` points, divided by one common scale (``SCALE``). The map is
orthogonal up to that scale, so :func:`decode` gives the waveform and :func:`encode` inverts it exactly: the
generated sound is judged as a waveform without a trained audio VAE.

The sound is synthesised in that cosine basis, frame by frame (a harmonic at frequency f is a bump around DCT bin
f / 12.5 Hz), so like an audio VAE's latent it changes smoothly along time. A first version synthesised the
waveform (continuous phase; random harmonic phases per item): its latent's coefficients turned with the phase
from frame to frame (white along time), and this tiny model learned nothing of it in 3000 steps (samples as far
from real sounds as noise, motion heard in 16 % of them).
"""

from __future__ import annotations

import functools
import math

import torch

from seacache_testing import proxy_natural as natural

HOP = 32  # waveform samples per sound latent frame (per channel)
SOUND_FPS = 25.0  # sound latent frames per second (the transformer's sound_latent_fps)
SAMPLE_RATE = int(HOP * SOUND_FPS)  # 800 Hz
VIDEO_FPS = 24.0
PIXEL_FRAMES = (natural.FRAMES - 1) * 4 + 1  # the clip's video frames (temporal compression 4)
SOUND_FRAMES = math.ceil(int(PIXEL_FRAMES / VIDEO_FPS * SAMPLE_RATE) / HOP)  # 18: the clip's duration, as diffusers
SOUND_DIM = 2 * HOP  # mid and side, HOP cosine coefficients each
SOUND_SHAPE = (SOUND_DIM, SOUND_FRAMES)
SAMPLES = SOUND_FRAMES * HOP
SCALE = 0.073  # latent = DCT coefficients / SCALE
SIGNAL = 0.466  # the synthesised coefficients' scale: the latent has about unit variance over the data
HARMONICS = 8
TIMBRE = {  # photo -> (fundamental Hz, harmonic roll-off exponent, even-harmonic weight, noise-band level)
    "astronaut": (55.0, 1.0, 1.0, 0.0),
    "camera": (62.0, 1.0, 0.0, 0.0),
    "coffee": (70.0, 2.0, 1.0, 0.0),
    "chelsea": (78.0, 3.0, 1.0, 0.0),
    "rocket": (87.0, 0.7, 1.0, 0.4),
    "hubble_deep_field": (98.0, 1.5, 0.3, 0.8),
    "coins": (110.0, 0.5, 0.0, 0.0),
    "brick": (123.0, 1.2, 1.0, 0.4),
}
BALANCE_GAIN = 5.0
CFG = 3.0  # one guidance for both streams; at the natural proxy's 4 the sound oversaturates (std 1.47x the data's)
BUMP = 0.6  # width (DCT bins) of a harmonic's bump
BIN_HZ = SAMPLE_RATE / (2 * HOP)  # frequency of one DCT-II bin step: 12.5 Hz


def _lerp(a: torch.Tensor, b: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    return a + (b - a) * u


def sound_latents(labels: torch.Tensor, boxes: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Sound latents [B, SOUND_DIM, SOUND_FRAMES] of class ``labels`` following the camera windows ``boxes``
    [B, T, 3] (centre y, centre x, side per video frame; interpolated between the first and last frame: linear in
    x, geometric in side, as the windows move)."""
    b = labels.shape[0]
    detune = 0.97 + 0.06 * torch.rand(b, generator=generator)
    noise = torch.randn(b, SOUND_FRAMES, HOP, generator=generator)
    u = torch.linspace(0.0, 1.0, SOUND_FRAMES)[:, None]  # [T, 1]
    bins = torch.arange(HOP, dtype=torch.float32)
    h = torch.arange(1, HARMONICS + 1, dtype=torch.float32)
    band = torch.exp(-(((bins - 6.0) / 4.0) ** 2))
    out = torch.zeros(b, SOUND_DIM, SOUND_FRAMES)
    for i, label in enumerate(labels.tolist()):
        f0, rolloff, even, noise_level = TIMBRE[natural.CLASSES[label][0]]
        first, last = boxes[i, 0], boxes[i, -1]
        middle_side = (0.5 * (first[2].log() + last[2].log())).exp()
        closer = middle_side / _lerp(first[2].log(), last[2].log(), u).exp()  # [T, 1]: > 1 further in than mid-clip
        pitch = detune[i] * f0 / BIN_HZ * closer  # fundamental in DCT bins
        amp = h.pow(-rolloff) * torch.where(h % 2 == 0, even, 1.0)
        amp = amp / amp.pow(2).sum().sqrt()
        bumps = torch.exp(-0.5 * ((bins[None, None] - h[None, :, None] * pitch[:, :, None]) / BUMP) ** 2)  # [T, K, HOP]
        mono = (amp[None, :, None] * bumps).sum(1) + noise_level * band * noise[i]  # [T, HOP]
        mono = mono * (80.0 / middle_side * closer.sqrt())
        x = _lerp(first[1], last[1], u)
        balance = torch.tanh(BALANCE_GAIN * (x - 0.5 * (first[1] + last[1])) / middle_side)
        angle = math.pi / 4 * (1 + balance)  # equal-power pan: L = cos, R = sin
        mid, side = mono * (angle.cos() + angle.sin()), mono * (angle.cos() - angle.sin())
        out[i] = torch.cat((mid, side), 1).T / math.sqrt(2.0)
    return out * (SIGNAL / SCALE)


def soundtrack(labels: torch.Tensor, boxes: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Stereo waveforms [B, 2, SAMPLES] of :func:`sound_latents`."""
    return decode(sound_latents(labels, boxes, generator))


@functools.lru_cache(maxsize=1)
def dct_matrix() -> torch.Tensor:
    """The orthonormal DCT-II matrix [HOP, HOP] (rows: cosine bins)."""
    n = torch.arange(HOP, dtype=torch.float64)
    d = torch.cos(math.pi / HOP * (n[None] + 0.5) * n[:, None]) * math.sqrt(2.0 / HOP)
    d[0] /= math.sqrt(2.0)
    return d.float()


def encode(wave: torch.Tensor) -> torch.Tensor:
    """Sound latent [B, SOUND_DIM, T] of stereo waveforms [B, 2, T * HOP]: per frame the mid and side signals'
    DCT-II coefficients (channel ``stream * HOP + bin``), divided by ``SCALE``."""
    b, _, n = wave.shape
    left, right = wave.view(b, 2, n // HOP, HOP).unbind(1)
    streams = torch.stack(((left + right), (left - right)), 1) / math.sqrt(2.0)  # [B, 2, T, HOP]
    coefficients = streams @ dct_matrix().T
    return coefficients.permute(0, 1, 3, 2).reshape(b, SOUND_DIM, n // HOP) / SCALE


def decode(latent: torch.Tensor) -> torch.Tensor:
    """Stereo waveforms [B, 2, T * HOP] of sound latents [B, SOUND_DIM, T]: the exact inverse of :func:`encode`."""
    b, _, t = latent.shape
    coefficients = (latent.float() * SCALE).view(b, 2, HOP, t).permute(0, 1, 3, 2)
    mid, side = (coefficients @ dct_matrix()).unbind(1)
    return torch.stack((mid + side, mid - side), 1).reshape(b, 2, t * HOP) / math.sqrt(2.0)


def make_clips(labels: torch.Tensor, generator: torch.Generator,
               frames: int = natural.FRAMES) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(latent videos [B, 4, T, 16, 16], sound latents [B, SOUND_DIM, SOUND_FRAMES]) of class ``labels``: the
    natural proxy's videos (the same for the same generator state) and their soundtracks; stills (``frames=1``)
    have no sound (None)."""
    boxes = natural.windows(labels, frames, generator)
    videos = natural.latent_videos(natural.render_windows(labels, boxes))
    return videos, (sound_latents(labels, boxes, generator) if frames > 1 else None)


# ----------------------------------------------------------------------------------------------- metrics
def frame_power(wave: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sound frame the left/right energies [B, 2, T] and the mid signal's DCT power [B, T, HOP]."""
    b, _, n = wave.shape
    frames = wave.view(b, 2, n // HOP, HOP)
    mid = (frames[:, 0] + frames[:, 1]) / math.sqrt(2.0)
    return frames.pow(2).sum(-1), (mid @ dct_matrix().T).pow(2)


def motion_features(wave: torch.Tensor) -> torch.Tensor:
    """Features of how a soundtrack moves [B, 3T]: per frame the stereo balance, the log loudness and the log
    spectral centroid of the mid signal (the last two minus their clip mean, so only their course counts)."""
    energy, power = frame_power(wave)
    total = energy.sum(1) + 1e-8
    balance = (energy[:, 1] - energy[:, 0]) / total
    loudness = total.log()
    bins = torch.arange(HOP, dtype=torch.float32) + 0.5
    centroid = ((power * bins).sum(-1) / (power.sum(-1) + 1e-8)).clamp(min=0.5).log()
    centre = lambda v: v - v.mean(1, keepdim=True)  # noqa: E731
    return torch.cat([balance, centre(loudness), centre(centroid)], 1)


def timbre_features(wave: torch.Tensor) -> torch.Tensor:
    """Features of a soundtrack's timbre [B, HOP]: the mid signal's log power per DCT bin, averaged over frames
    (register, harmonic pattern and noise floor), minus its mean over bins (loudness left out)."""
    spectrum = (frame_power(wave)[1].mean(1) + 1e-6).log()
    return spectrum - spectrum.mean(1, keepdim=True)


def snr_db(wave: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Signal-to-noise ratio (dB) of waveforms [B, 2, S] against reference waveforms. [B]"""
    noise = (wave - reference).pow(2).flatten(1).sum(1)
    return 10 * torch.log10(reference.pow(2).flatten(1).sum(1) / noise.clamp(min=1e-20))


def log_spectral_distance(wave: torch.Tensor, reference: torch.Tensor, window: int = 2 * HOP) -> torch.Tensor:
    """Log-spectral distance (dB) of waveforms [B, 2, S] to reference waveforms: the RMS over frequency of the
    difference of their log power spectra (STFT, Hann window of ``window`` samples, hop ``window / 4``, both
    channels), averaged over frames. [B]"""
    def spectrum(w):
        flat = w.flatten(0, 1)
        stft = torch.stft(flat, window, window // 4, window=torch.hann_window(window), return_complex=True)
        return 10 * torch.log10(stft.abs().pow(2) + 1e-10)

    d = (spectrum(wave) - spectrum(reference)).pow(2).mean(1).sqrt()  # [B*2, frames]
    return d.view(wave.shape[0], -1).mean(1)


def is_valid(report: dict) -> bool:
    """The bar: the natural proxy's video bar (:func:`proxy_natural.is_valid`); the sound at most half-way from real
    sounds (nearest-neighbour ratio 1) to noise (the synthetic proxy's data-like bar: most clips of a prompt sound
    nearly alike, so held-out real sounds lie very close to the reference); the prompted motion and the photo's
    timbre each heard in at least 2x chance (1/4 and 1/8) of the samples. The agreement of the motion heard with
    the motion seen in the same video is reported, not barred: the video's motion is recognised in about a third
    of the samples only (the natural proxy's weakness)."""
    return (natural.is_valid(report) and report["sound_nn_ratio"] <= 1.0 + 0.5 * (report["sound_noise_nn_ratio"] - 1.0)
            and report["sound_motion_accuracy"] >= 0.5 and report["sound_photo_accuracy"] >= 0.25)
