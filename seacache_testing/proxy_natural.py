"""Natural-statistics data for the quality proxy: camera pans and zooms over real photographs, as latent videos.

The synthetic data of ``quality_proxy`` is far smoother than real images (spectrum slope about -3.3 against
-2 to -2.7 for photographs) and its frames barely move, and the SEA filter is built on the power-law spectrum of
natural images; so a second proxy is trained on real photographs. They come bundled inside scikit-image
(``skimage.data``; every photo used is public domain or CC0, see ``PHOTOS``), so the data is deterministic and
needs no download.

A video: a 64x64-pixel camera window over one photo (resized to a 128-pixel short side), panning left or right
or zooming in or out over ``FRAMES`` frames; the prompt names the photo and the motion ("a cat pan left").
The latent is made the way a VAE latent looks: each frame is cut into 4x4-pixel RGB patches and a fixed linear
map (the top ``CHANNELS`` principal components of such patches over all photos, scaled to unit variance per
channel) turns each patch into ``CHANNELS`` values, so a 16x16 latent grid keeps the photo's spatial spectrum.
The channel count is a parameter (default ``CHANNELS`` = 4): the Wan 2.1 proxy (``proxy_wan``) takes the top 16
components, as Wan's 16-channel latent; ``decode`` maps a latent back to the RGB frames it stands for.
A single-frame item (``frames=1``) is a still crop with the prompt "a cat still" (the image-model proxy).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

# skimage.data name -> prompt word; licences from skimage.data's docstrings
PHOTOS = {
    "astronaut": "astronaut",  # NASA, public domain
    "camera": "cameraman",  # CC0 (Lav Varshney)
    "coffee": "coffee",  # CC0 (Rachel Michetti)
    "chelsea": "cat",  # CC0 (Stefan van der Walt)
    "rocket": "rocket",  # SpaceX, public domain
    "hubble_deep_field": "galaxies",  # NASA, public domain
    "coins": "coins",  # no known copyright restrictions
    "brick": "brick",  # CC0 Textures, CC0
}
MOTIONS = ("pan left", "pan right", "zoom in", "zoom out")
STILL = "still"
WORDS = ["<pad>", "<bos>", "<eos>", "<null>", "a", "pan", "zoom", "left", "right", "in", "out", STILL, *PHOTOS.values()]
TOKEN = {w: i for i, w in enumerate(WORDS)}
CLASSES = [(photo, motion) for photo in PHOTOS for motion in MOTIONS]  # 32 video prompts
PROMPT_LENGTH = 6
FRAMES, CHANNELS, PATCH, PIXELS = 5, 4, 4, 64
LATENT_SHAPE = (CHANNELS, FRAMES, PIXELS // PATCH, PIXELS // PATCH)
CFG = 4.0  # below the Cosmos3 recipe's 6, where this small model oversaturates (sample std 1.15x the data's)
SHORT_SIDE = 128  # photos resized to this short side before cropping
WINDOW = (64.0, 96.0)  # camera window side in resized-photo pixels (uniform)
PAN_PER_FRAME = 0.08  # window sides per frame
ZOOM_PER_FRAME = 0.9  # window side ratio per frame (zoom in)


@functools.lru_cache(maxsize=1)
def photos() -> tuple[torch.Tensor, ...]:
    """The photos as float RGB [3, H, W] in [0, 1], short side ``SHORT_SIDE`` (antialiased resize)."""
    import skimage.data

    out = []
    for name in PHOTOS:
        image = torch.from_numpy(getattr(skimage.data, name)()).float() / 255.0
        image = image.expand(3, *image.shape) if image.ndim == 2 else image.permute(2, 0, 1)
        scale = SHORT_SIDE / min(image.shape[1:])
        size = [round(n * scale) for n in image.shape[1:]]
        out.append(F.interpolate(image[None], size=size, mode="bilinear", antialias=True, align_corners=False)[0])
    return tuple(out)


@functools.lru_cache(maxsize=2)
def patch_map(channels: int = CHANNELS) -> tuple[torch.Tensor, torch.Tensor]:
    """The fixed linear "VAE" map: (mean [48], components [channels, 48]) of 4x4 RGB patches over every photo:
    the top principal components (sign fixed so the largest entry is positive), all divided by one scale that
    gives the latent unit variance. One common scale keeps the channels' relative power, hence the photos'
    spatial spectrum (per-channel scaling would lift the nearly white detail channels to the level of the
    luminance channel)."""
    patches = torch.cat([F.unfold(p[None], PATCH, stride=PATCH)[0].T for p in photos()])
    mean = patches.mean(0)
    centred = patches - mean
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)
    components = vh[:channels]
    sign = torch.sign(components.gather(1, components.abs().argmax(1, keepdim=True)))
    scale = s[:channels].pow(2).mean().sqrt() / math.sqrt(len(patches) - 1)
    return mean, components * sign / scale


def encode(frames: torch.Tensor, channels: int = CHANNELS) -> torch.Tensor:
    """Latent [N, channels, H/4, W/4] of RGB frames [N, 3, H, W] by the fixed patch map."""
    mean, components = patch_map(channels)
    n, _, h, w = frames.shape
    patches = F.unfold(frames, PATCH, stride=PATCH).transpose(1, 2) - mean  # [N, L, 48]
    return (patches @ components.T).transpose(1, 2).reshape(n, channels, h // PATCH, w // PATCH)


def decode(latents: torch.Tensor) -> torch.Tensor:
    """RGB frames [N, 3, 4h, 4w] of latents [N, C, h, w] (C channels of the patch map): each patch is the mean
    patch plus the components weighted by its latent values, the exact inverse of :func:`encode` on the span of
    the top C components (what a C-channel latent can hold; ``encode(decode(z)) == z``)."""
    n, channels, h, w = latents.shape
    mean, components = patch_map(channels)
    inverse = torch.linalg.pinv(components.double()).float()  # [48, C]: the rows are orthogonal, one common norm
    patches = latents.flatten(2).transpose(1, 2) @ inverse.T + mean  # [N, L, 48]
    return F.fold(patches.transpose(1, 2), (h * PATCH, w * PATCH), PATCH, stride=PATCH)


def windows(labels: torch.Tensor, frames: int, generator: torch.Generator) -> torch.Tensor:
    """Per item and frame the camera window (centre y, centre x, side) in resized-photo pixels. [B, T, 3]

    Side drawn from ``WINDOW``; a pan moves the centre ``PAN_PER_FRAME`` sides per frame, a zoom scales the
    side by ``ZOOM_PER_FRAME`` (or its inverse) per frame, about the middle frame; the centre is drawn so the
    window stays inside the photo on every frame. A single frame is a still window."""
    b = labels.shape[0]
    u = torch.rand(b, 3, generator=generator)
    side0 = WINDOW[0] + (WINDOW[1] - WINDOW[0]) * u[:, 0]
    t = torch.arange(frames, dtype=torch.float32) - (frames - 1) / 2 if frames > 1 else torch.zeros(1)
    out = torch.zeros(b, frames, 3)
    images = photos()
    for i, label in enumerate(labels.tolist()):
        photo, motion = CLASSES[label]
        h, w = images[list(PHOTOS).index(photo)].shape[1:]
        side = side0[i] * torch.ones_like(t)
        shift_x = torch.zeros_like(t)
        if motion.startswith("zoom"):
            side = side0[i] * (ZOOM_PER_FRAME if motion == "zoom in" else 1 / ZOOM_PER_FRAME) ** t
        else:
            shift_x = (-1 if motion == "pan left" else 1) * PAN_PER_FRAME * side0[i] * t
        half = side / 2
        lo_x, hi_x = float((half - shift_x).max()), float((w - half - shift_x).min())
        lo_y, hi_y = float(half.max()), float((h - half).min())
        cy = lo_y + (hi_y - lo_y) * u[i, 1]
        cx = lo_x + (hi_x - lo_x) * u[i, 2]
        out[i] = torch.stack([cy.expand_as(t), cx + shift_x, side], dim=1)
    return out


def render(labels: torch.Tensor, frames: int, generator: torch.Generator) -> torch.Tensor:
    """RGB videos [B, T, 3, PIXELS, PIXELS]: each item's photo seen through its camera windows (bilinear)."""
    return render_windows(labels, windows(labels, frames, generator))


def render_windows(labels: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """RGB videos [B, T, 3, PIXELS, PIXELS] of each item's photo through the camera windows ``boxes`` [B, T, 3]."""
    frames, images = boxes.shape[1], photos()
    out = []
    for i, label in enumerate(labels.tolist()):
        image = images[list(PHOTOS).index(CLASSES[label][0])]
        h, w = image.shape[1:]
        cy, cx, side = boxes[i].unbind(1)
        theta = torch.zeros(frames, 2, 3)
        theta[:, 0, 0], theta[:, 1, 1] = side / w, side / h
        theta[:, 0, 2], theta[:, 1, 2] = 2 * cx / w - 1, 2 * cy / h - 1
        grid = F.affine_grid(theta, (frames, 3, PIXELS, PIXELS), align_corners=False)
        out.append(F.grid_sample(image.expand(frames, -1, -1, -1), grid, mode="bilinear", align_corners=False))
    return torch.stack(out)


def make_videos(labels: torch.Tensor, generator: torch.Generator, frames: int = FRAMES,
                channels: int = CHANNELS) -> torch.Tensor:
    """Latent videos [B, channels, T, 16, 16] of class ``labels`` (photo and motion; ``frames=1``: stills)."""
    return latent_videos(render(labels, frames, generator), channels)


def latent_videos(rgb: torch.Tensor, channels: int = CHANNELS) -> torch.Tensor:
    """Latent videos [B, channels, T, 16, 16] of RGB videos [B, T, 3, PIXELS, PIXELS] by the fixed patch map."""
    latent = encode(rgb.flatten(0, 1), channels)
    return latent.view(rgb.shape[0], rgb.shape[1], *latent.shape[1:]).transpose(1, 2).contiguous()


def prompt_tokens(label: int | None, frames: int = FRAMES) -> list[int]:
    """Token ids of class ``label``'s prompt ("a cat pan left"; "a cat still" for one frame), or the empty prompt."""
    if label is None:
        return [TOKEN["<bos>"]] + [TOKEN["<null>"]] * (PROMPT_LENGTH - 2) + [TOKEN["<eos>"]]
    photo, motion = CLASSES[label]
    words = [PHOTOS[photo], STILL, "<null>"] if frames == 1 else [PHOTOS[photo], *motion.split()]
    return [TOKEN[w] for w in ["<bos>", "a", *words, "<eos>"]]


# ----------------------------------------------------------------------------------------------- validity
def spectrum_slope(videos: torch.Tensor) -> float:
    """Slope of the radially averaged spatial power spectrum (log power against log frequency, frequencies
    1..H/2 cycles per frame) of latents [B, C, T, H, W], power summed over channels and averaged over frames."""
    x = videos - videos.mean(dim=(-2, -1), keepdim=True)
    power = torch.fft.fft2(x).abs().pow(2).sum(1).flatten(0, 1).mean(0)  # [H, W]
    n = power.shape[-1]
    f = torch.fft.fftfreq(n) * n
    radius = torch.round(torch.sqrt(f[:, None] ** 2 + f[None, :] ** 2)).long()
    k = torch.arange(1, n // 2 + 1)
    radial = torch.stack([power[radius == i].mean() for i in k.tolist()])
    design = torch.stack([k.float().log(), torch.ones(len(k))], 1)
    return float(torch.linalg.lstsq(design, radial.log()[:, None]).solution[0])


def _motion_warp(motion: str) -> tuple[float, float]:
    """(scale, x offset) of the map from a frame's normalised coordinates to the previous frame's."""
    if motion.startswith("zoom"):
        return (ZOOM_PER_FRAME if motion == "zoom in" else 1 / ZOOM_PER_FRAME), 0.0
    return 1.0, (-2 if motion == "pan left" else 2) * PAN_PER_FRAME


def motion_of(videos: torch.Tensor) -> torch.Tensor:
    """The camera motion (index into ``MOTIONS``) that best explains each video [B, C, T, H, W]: each frame is
    predicted by warping the previous one with every candidate motion (bilinear), and the candidate with the
    least squared error over the central 80 % of the frame wins."""
    b, c, t, h, w = videos.shape
    previous = videos[:, :, :-1].transpose(1, 2).flatten(0, 1)
    following = videos[:, :, 1:].transpose(1, 2).flatten(0, 1)
    ident = F.affine_grid(torch.eye(2, 3)[None], (1, 1, h, w), align_corners=False)
    inside = (ident.abs() <= 0.8).all(-1)[0]
    errors = []
    for motion in MOTIONS:
        scale, offset = _motion_warp(motion)
        theta = torch.tensor([[scale, 0.0, offset], [0.0, scale, 0.0]])[None].expand(len(previous), -1, -1)
        warped = F.grid_sample(previous, F.affine_grid(theta, previous.shape, align_corners=False), align_corners=False)
        err = (warped - following).pow(2).mean(1)[:, inside].mean(-1)
        errors.append(err.view(b, t - 1).sum(1))
    return torch.stack(errors, 1).argmin(1)


def nearest(videos: torch.Tensor, reference: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(RMS distance to the nearest neighbour in ``reference``, its index) for each video. ([N], [N])"""
    d = torch.cdist(videos.flatten(1), reference.flatten(1))
    values, index = d.min(dim=1)
    return values / math.sqrt(videos[0].numel()), index


def video_report(generated: torch.Tensor, labels: torch.Tensor, reference: torch.Tensor, reference_y: torch.Tensor,
                 real: torch.Tensor, real_y: torch.Tensor) -> dict:
    """The validity numbers of generated latent videos of class ``labels`` against a reference set and held-out
    real videos (with their classes); see :func:`seacache_testing.quality_proxy.natural_validity`. Single frames: photo
    only."""
    frames = generated.shape[2]
    noise = reference.mean() + reference.std() * torch.randn(real.shape, generator=torch.Generator().manual_seed(9))
    photo = lambda y: y // len(MOTIONS)  # noqa: E731
    real_d, real_i = nearest(real, reference)
    gen_d, gen_i = nearest(generated, reference)
    real_ok, gen_ok = photo(reference_y[real_i]) == photo(real_y), photo(reference_y[gen_i]) == photo(labels)
    photo_accuracy = float(gen_ok.float().mean())
    if frames > 1:
        real_ok &= motion_of(real) == real_y % len(MOTIONS)
        motion_ok = motion_of(generated) == labels % len(MOTIONS)
        gen_ok &= motion_ok
    return {
        "samples": len(labels),
        "nn_ratio": float(gen_d.median() / real_d.median()),
        "noise_nn_ratio": float(nearest(noise, reference)[0].median() / real_d.median()),
        "slope": spectrum_slope(generated),
        "data_slope": spectrum_slope(reference),
        "prompt_accuracy": float(gen_ok.float().mean()),
        "photo_accuracy": photo_accuracy,
        **({"motion_accuracy": float(motion_ok.float().mean())} if frames > 1 else {}),
        "real_prompt_accuracy": float(real_ok.float().mean()),
        "sample_std": float(generated.std()),
        "data_std": float(reference.std()),
    }


def is_valid(report: dict, prefix: str = "") -> bool:
    """The bar: nearest-neighbour ratio at most held-out real + 0.2 (real scores 1 by construction), spectrum
    slope within 0.3 of the data's, and the prompt recognised in at least 4x chance of the samples (``prefix``
    ``"image_"``: the same bar for stills)."""
    get = lambda k: report[prefix + k]  # noqa: E731
    return (get("nn_ratio") <= 1.2 and abs(get("slope") - get("data_slope")) <= 0.3
            and get("prompt_accuracy") >= 4 * get("chance"))
