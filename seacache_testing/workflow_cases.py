"""The shipped example workflows as the tests run them: their file names, a ComfyUI session prepared with the
tiny checkpoints they run on (:func:`prepare_workflow_session`, :func:`add_anymodel_files`; tests/conftest.py makes
them the ``session`` and ``anymodel_session`` fixtures), each workflow's tiny run settings and stand-in models
(:func:`tiny_run`), and the API prompts frozen at the 1.0.0 release (:data:`FROZEN`, :func:`version_folder`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from . import comfyui_harness, tiny_comfy_models
from . import workflow_runner as wr
from .make_tiny_checkpoint import make_tiny_checkpoint

T2V = "cosmos3_t2v_seacache.json"
I2V = "cosmos3_i2v_seacache.json"
WORKFLOWS = [T2V, I2V]
EDGE_T2V = "cosmos3_edge_t2v_12gb.json"
T2I = "cosmos3_t2i_seacache.json"
SUPER_I2V = "cosmos3_super_i2v_seacache.json"
I2V_4STEP = "cosmos3_i2v_4step_seacache.json"
# The family workflows: the member and mode whose reference settings they follow (cosmos3/presets.py), the card
# they are sized for, their size, and the tiny checkpoint preset they run on in the tests.
FAMILY = {
    EDGE_T2V: dict(member="Cosmos3-Edge", mode="t2v", card="12 GB", size=(832, 480, 121), preset="tiny-edge"),
    T2I: dict(member="Cosmos3-Super-Text2Image", mode="t2i", card="80 GB", size=(1024, 1024, 1), preset="tiny-t2i"),
    SUPER_I2V: dict(member="Cosmos3-Super-Image2Video", mode="i2v", card="80 GB", size=(832, 480, 93), preset="tiny-i2v"),
    I2V_4STEP: dict(member="Cosmos3-Super-Image2Video-4Step", mode="i2v", card="80 GB", size=(832, 480, 93), preset="tiny-i2v-4step"),
}
SOUND_T2V = "cosmos3_t2v_sound_seacache.json"
WAN = "wan22_5b_t2v_seacache.json"
FLUX = "flux_t2i_seacache.json"
LTX2 = "ltx2_t2v_sound_seacache.json"
ANYMODEL = [WAN, FLUX]
ALL = WORKFLOWS + list(FAMILY) + [SOUND_T2V] + ANYMODEL + [LTX2]
SIZE_NODES = ("SeaCacheCosmos3EmptyLatentVideo", "SeaCacheCosmos3ImageToVideo", "SeaCacheCosmos3EmptyAVLatent")

FIXTURES = wr.PACK_ROOT / "tests" / "fixtures"
FROZEN = FIXTURES / "api_1_0_0"  # every example's 1.0.0 UI workflow and, per ComfyUI version, API prompt


def version_folder(folder: Path) -> Path:
    """The subfolder of ``folder`` for the running ComfyUI: API prompts hold core nodes' inputs too, which differ
    between ComfyUI versions (SaveVideo's ``codec`` became ``format.codec``), so each tested version has its own
    (the newest one not newer than the running ComfyUI, else the oldest)."""
    from comfyui_version import __version__

    def key(v):
        return tuple(int(x) for x in v.split("."))

    versions = sorted((p.name for p in folder.iterdir() if p.is_dir()), key=key)
    older = [v for v in versions if key(v) <= key(__version__)]
    return folder / (older[-1] if older else versions[0])


TINY_NAME = "tiny-cosmos3"
SOUND_NAME = "tiny-cosmos3-sound"
TEST_IMAGE = "seacache_workflow_test.png"
STEPS, SIZE, FRAMES = 6, 64, 9


def prepare_workflow_session(comfy, tmp_path_factory):
    """``comfy`` (a ComfyUI session) with the pack and the core nodes the workflows use, the tiny checkpoints of
    every example (family ones under ``models/cosmos3`` where that member's pack keeps them) and a test image."""
    if "SeaCacheApply" not in comfy.nodes.NODE_CLASS_MAPPINGS:
        comfyui_harness.load_pack_with_comfyui_loader(comfy)
    comfy.load_extra_nodes(*wr.EXTRA_NODE_FILES)
    if all((comfy.path / "comfy_extras" / f).is_file() for f in wr.AV_EXTRA_NODE_FILES):
        comfy.load_extra_nodes(*wr.AV_EXTRA_NODE_FILES)
    models = tmp_path_factory.mktemp("workflow_models")
    make_tiny_checkpoint(str(models / TINY_NAME))
    make_tiny_checkpoint(str(models / SOUND_NAME), "tiny-sound")
    comfy.folder_paths.add_model_folder_path("diffusion_models", str(models))
    community = tmp_path_factory.mktemp("workflow_cosmos3")  # models/cosmos3, as the ComfyUI-Cosmos3 pack keeps them
    for name, spec in FAMILY.items():
        make_tiny_checkpoint(str((community if name == EDGE_T2V else models) / family_checkpoint(name)), spec["preset"])
    comfy.folder_paths.add_model_folder_path("cosmos3", str(community))
    pixels = np.zeros((72, 120, 3), np.uint8)  # not square: the I2V node center-crops it
    pixels[..., 0] = np.linspace(0, 255, 120, dtype=np.uint8)[None]
    pixels[..., 1] = np.linspace(0, 255, 72, dtype=np.uint8)[:, None]
    pixels[20:50, 40:80, 2] = 255
    inputs = Path(comfy.folder_paths.get_input_directory())
    Image.fromarray(pixels).save(inputs / TEST_IMAGE)
    if (comfy.path / "input" / "example.png").is_file() and not (inputs / "example.png").exists():
        shutil.copy(comfy.path / "input" / "example.png", inputs / "example.png")
    return comfy


def family_checkpoint(name):
    """The tiny checkpoint file name of family workflow ``name``."""
    return f"tiny-{FAMILY[name]['preset']}-workflow"


def overrides(extra=None):
    """Tiny run settings (``{(node type, widget): value}``) of the Cosmos3 workflows, plus ``extra``."""
    values = {
        ("SeaCacheCosmos3Loader", "checkpoint"): TINY_NAME,
        ("SeaCacheCosmos3Loader", "weight_dtype"): "default",
        ("SeaCacheCosmos3Scheduler", "steps"): STEPS,
        ("LoadImage", "image"): TEST_IMAGE,
        ("SaveVideo", "filename_prefix"): "video/seacache_workflow_test",
        ("SaveImage", "filename_prefix"): "seacache_workflow_test",
    }
    for node_type in SIZE_NODES:
        values.update({(node_type, "width"): SIZE, (node_type, "height"): SIZE, (node_type, "length"): FRAMES})
    values.update(extra or {})
    return values


def has_ltx2(session) -> bool:
    """Whether this ComfyUI has LTX-2's audio-video nodes (loaded into the session where it does)."""
    return "LTXVEmptyLatentAudio" in session.nodes.NODE_CLASS_MAPPINGS


def family_overrides(name):
    """Tiny run settings for a family workflow: its member's tiny checkpoint, 64x64, 9 frames (1 for images)."""
    values = overrides({("SeaCacheCosmos3Loader", "checkpoint"): family_checkpoint(name)})
    if FAMILY[name]["mode"] == "t2i":
        values[("SeaCacheCosmos3EmptyLatentVideo", "length")] = 1
    return values


ANY_STEPS = 8


def add_anymodel_files(session, tmp_path_factory):
    """``session`` plus empty files named like the any-model workflows' checkpoints, so ComfyUI's validation
    accepts the shipped file names (the loaders themselves are replaced by tiny models when running)."""
    root = tmp_path_factory.mktemp("anymodel_files")
    for folder, names in (("diffusion_models", ("wan2.2_ti2v_5B_fp16.safetensors", "flux1-dev.safetensors")),
                          ("text_encoders", ("umt5_xxl_fp8_e4m3fn_scaled.safetensors", "clip_l.safetensors", "t5xxl_fp8_e4m3fn.safetensors",
                                             "gemma_3_12B_it_fp4_mixed.safetensors")),
                          ("checkpoints", ("ltx-2-19b-dev-fp8.safetensors",)),
                          ("vae", ("wan2.2_vae.safetensors", "ae.safetensors"))):
        (root / folder).mkdir()
        for name in names:
            (root / folder / name).touch()
        session.folder_paths.add_model_folder_path(folder, str(root / folder))
    return session


def stand_ins(model_name, scale):
    """Loaders replaced by a tiny random-weight core model, text encoders by random embeddings of its width, and
    VAE decoding by a fixed map of three latent channels to RGB (every other node runs for real)."""
    spec = tiny_comfy_models.SPECS[model_name]

    def decode(samples, vae):
        latent = samples["samples"]
        latent = latent if isinstance(latent, torch.Tensor) else latent.unbind()[0]  # as VAEDecode: the video
        rgb = torch.sigmoid(latent[:, :3].float())
        if rgb.ndim == 5:
            rgb = rgb.movedim(2, 1).flatten(0, 1)
        rgb = torch.nn.functional.interpolate(rgb, scale_factor=scale, mode="nearest")
        return (rgb.movedim(1, -1),)

    return {
        "UNETLoader": lambda **_: (tiny_comfy_models.build(model_name),),
        "CLIPLoader": lambda **_: (None,),
        "DualCLIPLoader": lambda **_: (None,),
        "VAELoader": lambda **_: (None,),
        "CLIPTextEncode": lambda text, clip: (tiny_comfy_models.conditioning(spec, seed=len(text)),),
        "VAEDecode": decode,
    }


ANY_OVERRIDES = {("KSampler", "steps"): ANY_STEPS, ("BasicScheduler", "steps"): ANY_STEPS,
                 ("Wan22ImageToVideoLatent", "width"): 64, ("Wan22ImageToVideoLatent", "height"): 64,
                 ("Wan22ImageToVideoLatent", "length"): 9, ("EmptySD3LatentImage", "width"): 64,
                 ("EmptySD3LatentImage", "height"): 64, ("SaveVideo", "filename_prefix"): "video/seacache_anymodel_test",
                 ("SaveImage", "filename_prefix"): "seacache_anymodel_test"}


def anymodel_stand_ins(name):
    """The tiny core model and stand-ins of an any-model workflow (Wan 2.2 5B or Flux)."""
    return stand_ins(*(("wan22_ti2v_5b", 16) if name == WAN else ("flux", 8)))


class StandInAudioVAE:
    """LTX-2's audio VAE as LTXV Empty Latent Audio and LTXV Audio VAE Decode use it: 8 latent channels, 16
    frequency bins, 25 latents a second, decoded to 24 kHz stereo by a fixed map (tanh of the channel mean)."""

    latent_channels = 8

    def __init__(self):
        self.first_stage_model = self
        self.latent_frequency_bins, self.output_sample_rate = 16, 24000

    @staticmethod
    def num_of_latents_from_frames(frames_number, frame_rate):
        return round(frames_number / frame_rate * 25)

    def decode(self, latent):
        wave = torch.tanh(latent.float().mean(dim=(1, 3))).repeat_interleave(self.output_sample_rate // 25, dim=1)
        return torch.stack([wave, -wave], dim=-1)  # [B, samples, channels]: the node moves channels to dim 1


LTX2_OVERRIDES = {("EmptyLTXVLatentVideo", "width"): 128, ("EmptyLTXVLatentVideo", "height"): 128,
                  ("EmptyLTXVLatentVideo", "length"): 9, ("LTXVEmptyLatentAudio", "frames_number"): 9,
                  ("LTXVScheduler", "steps"): ANY_STEPS, ("SaveVideo", "filename_prefix"): "video/seacache_ltx2_test"}


def ltx2_stand_ins():
    """A tiny random LTX-2 (ComfyUI's LTXAVModel) for the checkpoint, the stand-in audio VAE, no text encoder."""
    ins = stand_ins("ltxav", 32)
    ins.update({"CheckpointLoaderSimple": lambda **_: (ins["UNETLoader"]()[0], None, None),
                "LTXAVTextEncoderLoader": lambda **_: (None,), "LTXVAudioVAELoader": lambda **_: (StandInAudioVAE(),)})
    return ins


def runnable_tiny_run(ns, name):
    """:func:`tiny_run` for ``name``, or a pytest skip where this ComfyUI cannot run that workflow (LTX-2 without its
    audio-video nodes, Cosmos3 sound without NestedTensor latents)."""
    import importlib.util

    import pytest

    if name == LTX2 and not has_ltx2(ns):
        pytest.skip("this ComfyUI has no LTX-2 audio-video nodes")
    if "sound" in name and name != LTX2 and importlib.util.find_spec("comfy.nested_tensor") is None:
        pytest.skip("this ComfyUI has no NestedTensor audio-video latents (Cosmos3 sound refuses to run there)")
    return tiny_run(name)


def tiny_run(name):
    """``(overrides, stand_ins)`` that run shipped workflow ``name`` on the tiny checkpoints and models of
    :func:`prepare_workflow_session` and :func:`add_anymodel_files`."""
    if name in FAMILY:
        return family_overrides(name), None
    if name == SOUND_T2V:
        return overrides({("SeaCacheCosmos3Loader", "checkpoint"): SOUND_NAME}), None
    if name in ANYMODEL:
        return ANY_OVERRIDES, anymodel_stand_ins(name)
    if name == LTX2:
        return LTX2_OVERRIDES, ltx2_stand_ins()
    return overrides(), None
