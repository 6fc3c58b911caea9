"""Reference generation settings of every Cosmos3 family member, as data for nodes, workflows and docs.

Sources, in order of authority: diffusers 0.42.1 (``Cosmos3OmniPipeline`` defaults: 1280x720, 189 frames, 24 fps,
35 steps, CFG 6; the distilled modular pipeline: fixed ``distilled_sigmas``, CFG 1, FlowMatchEuler; its guidance
interval test ``lo <= t <= hi`` on the int64 pipeline timestep ``t = 1000 * sigma``), NVIDIA's model reference and model
cards (family, sizes, supported settings, Text2Image and Edge recipes, Super-Image2Video at 16 fps), and SGLang's
Cosmos3 defaults for Edge. ``source`` names where each row's numbers come from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TIMESTEP_SCALE = 1000.0
"""Pipeline timestep per unit sigma (the scheduler's ``num_train_timesteps``): guidance intervals use timesteps."""


@dataclass(frozen=True)
class ReferenceSettings:
    """One recommended recipe of a family member for one mode."""

    mode: str  # "t2v", "i2v" or "t2i"
    width: int
    height: int
    frames: int  # pixel frames (1 = image)
    fps: float
    steps: int
    cfg: float
    shift: float | None  # flow shift of the schedule; None: fixed distilled sigmas from the checkpoint
    sampler: str  # ComfyUI sampler name
    guidance_interval: tuple[float, float] | None  # CFG only for pipeline timesteps in [lo, hi]; None: every step
    source: str


@dataclass(frozen=True)
class FamilyMember:
    """A Cosmos3 checkpoint of the generator family and its recipes (first = the one to start from)."""

    name: str
    repo: str  # Hugging Face id
    params_billion: float
    backbone: str  # "qwen3" (hidden_act silu) or "nemotron" (hidden_act relu2)
    negative_prompt_asset: bool  # ships assets/negative_prompt.json
    settings: tuple[ReferenceSettings, ...]


_DIFFUSERS = "diffusers 0.42.1 Cosmos3OmniPipeline defaults (shift: checkpoint scheduler config, 10 at 720p)"
_NANO_SUPER = (
    ReferenceSettings("t2v", 1280, 720, 189, 24.0, 35, 6.0, 10.0, "uni_pc_bh2", None, _DIFFUSERS),
    ReferenceSettings("i2v", 1280, 720, 189, 24.0, 35, 6.0, 10.0, "uni_pc_bh2", None, _DIFFUSERS),
    ReferenceSettings("t2v", 832, 480, 189, 24.0, 35, 6.0, 5.0, "uni_pc_bh2", None,
                      "NVIDIA default 480p tier; shift 5 at 480p (3 at 256p)"),
)
_FOUR_STEP = "diffusers 0.42.1 Cosmos3DistilledModularPipeline: checkpoint distilled_sigmas, CFG 1 baked in"

FAMILY: dict[str, FamilyMember] = {
    member.name: member
    for member in (
        FamilyMember("Cosmos3-Nano", "nvidia/Cosmos3-Nano", 16, "qwen3", True, _NANO_SUPER),
        FamilyMember("Cosmos3-Super", "nvidia/Cosmos3-Super", 64, "qwen3", False, _NANO_SUPER),
        FamilyMember("Cosmos3-Edge", "nvidia/Cosmos3-Edge", 4, "nemotron", True, (
            ReferenceSettings("t2v", 832, 480, 121, 24.0, 50, 5.0, 3.0, "uni_pc_bh2", None,
                              "NVIDIA model reference; SGLang Edge video defaults (832x480, CFG 5, shift 3)"),
            ReferenceSettings("i2v", 832, 480, 121, 24.0, 20, 6.0, 12.0, "uni_pc_bh2", None,
                              "Cosmos3-Edge model card, I2V recipe of the 2026-08 checkpoint update"),
            ReferenceSettings("t2i", 640, 640, 1, 24.0, 50, 7.0, 3.0, "uni_pc_bh2", None,
                              "SGLang Edge text-to-image defaults (640x640, CFG 7, shift 3)"),
        )),
        FamilyMember("Cosmos3-Super-Text2Image", "nvidia/Cosmos3-Super-Text2Image", 64, "qwen3", False, (
            ReferenceSettings("t2i", 1024, 1024, 1, 24.0, 50, 7.0, 3.0, "uni_pc_bh2", (400.0, 1000.0),
                              "NVIDIA Text2Image recipe: CFG only for timesteps in [400, 1000]"),
        )),
        FamilyMember("Cosmos3-Super-Image2Video", "nvidia/Cosmos3-Super-Image2Video", 64, "qwen3", False, (
            ReferenceSettings("i2v", 1280, 720, 189, 16.0, 35, 6.0, 10.0, "uni_pc_bh2", None,
                              "NVIDIA: Super-Image2Video runs at 16 fps; other values as Super"),
        )),
        FamilyMember("Cosmos3-Super-Text2Image-4Step", "nvidia/Cosmos3-Super-Text2Image-4Step", 64, "qwen3", False, (
            ReferenceSettings("t2i", 1024, 1024, 1, 24.0, 4, 1.0, None, "euler", None, _FOUR_STEP),
        )),
        FamilyMember("Cosmos3-Super-Image2Video-4Step", "nvidia/Cosmos3-Super-Image2Video-4Step", 64, "qwen3", False, (
            ReferenceSettings("i2v", 1280, 720, 189, 16.0, 4, 1.0, None, "euler", None, _FOUR_STEP),
        )),
    )
}


def pipeline_timestep(sigma: float) -> int:
    """The reference pipeline's timestep at noise level ``sigma``: its UniPC scheduler stores ``1000 * sigma``
    (float64) as int64, i.e. truncated, and the guidance interval is tested on that integer."""
    return math.floor(float(sigma) * TIMESTEP_SCALE)


def guidance_active(sigma: float, interval: tuple[float, float] | None) -> bool:
    """Whether CFG applies at noise level ``sigma``: always without an interval, else when the pipeline timestep
    (:func:`pipeline_timestep`) lies in ``[lo, hi]`` (ends included, as diffusers' interval gate)."""
    if interval is None:
        return True
    lo, hi = interval
    return float(lo) <= pipeline_timestep(sigma) <= float(hi)


def reference_settings(member: str, mode: str | None = None) -> ReferenceSettings:
    """The recipe of ``member`` for ``mode`` (its first recipe when ``mode`` is None); raises naming the choices."""
    if member not in FAMILY:
        raise KeyError(f"Unknown Cosmos3 family member {member!r}; choose one of {sorted(FAMILY)}.")
    settings = FAMILY[member].settings
    for row in settings:
        if mode is None or row.mode == mode:
            return row
    raise KeyError(f"{member} has no {mode!r} recipe; it has {sorted({s.mode for s in settings})}.")
