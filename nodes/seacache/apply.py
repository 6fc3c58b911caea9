"""SeaCache Apply: a MODEL clone whose steps may skip their expensive stack."""

from __future__ import annotations

import dataclasses
import inspect

import comfy.patcher_extension
from comfy_api.latest import io

from ...seacache_core import SeaCacheConfig
from ...seacache_core.sea_filter import FIRST_BLOCK_GATES
from ..comfy_internals import FIRST_BLOCK, SEACACHE, require
from .composition import refuse_other_caches
from .hooks import gate_model_call, outer_sample_wrapper, schedule_in_flow
from .run_inputs import refuse_unreachable_first_block
from .seams import remove_seacache, select_seam
from .seams.base import WRAPPER_KEY
from .settings import SETTINGS_OPTION, SeaCacheSettings

POWER_CHOICES = {"auto": None, "3 (video)": 3.0, "2 (image)": 2.0}
STORAGE_CHOICES = {"compute device": "compute", "cpu": "cpu"}
GATE_CHOICES = {"sea": "sea", "sea same-sigma": "sea_same_sigma", "first block": "first_block",
                "first block same-sigma": "first_block_same_sigma"}
FORECASTER_CHOICES = {"chebyshev": "chebyshev"}  # residual_order values naming a forecaster, over the seam's order
RESIDUAL_CHOICES = ("auto", "0", "1", "2", *FORECASTER_CHOICES)  # residual_order's values: "auto" is the seam's order
# API prompts saved before the `gate` (1.0.0) or the `min_steps` input existed run as then: gate sea, no floor
GATE_BEFORE_INPUT, MIN_STEPS_BEFORE_INPUT = "sea", 0
AUTO_WARMUP = -1
DEFAULTS = SeaCacheConfig()  # the widgets' defaults: their one home is seacache_core/config.py
# Expert inputs are folded away on the canvas where the running ComfyUI's V3 inputs take `advanced` (newer ones).
EXPERT = {"advanced": True} if "advanced" in inspect.signature(io.Input.__init__).parameters else {}


def choice_label(choices: dict, value) -> str:
    """The option of ``choices`` standing for the config value ``value``."""
    return next(label for label, choice in choices.items() if choice == value)


def apply_seacache(model, settings: SeaCacheSettings, seam_order: bool = False):
    """A clone of ``model`` with SeaCache's wrappers, replacing an earlier application; bad models, other caches and a
    ComfyUI lacking a symbol it needs (:mod:`..comfy_internals`) fail here. ``seam_order``: the seam's Newton order."""
    require(SEACACHE, "SeaCache Apply")
    if settings.config.gate in FIRST_BLOCK_GATES:
        require(FIRST_BLOCK, f"SeaCache Apply's gate {settings.config.gate!r}")
    patched = model.clone()
    remove_seacache(patched)
    refuse_other_caches(patched, patched.model_options)
    seam = select_seam(patched, patched.model_options)
    seam.detach(patched)
    refuse_unreachable_first_block(settings.config, seam, {})
    if seam_order:
        settings = dataclasses.replace(settings, config=dataclasses.replace(settings.config, order=seam.auto_order))
    if settings.config.warmup_steps is None:
        settings = dataclasses.replace(settings, config=dataclasses.replace(settings.config, warmup_steps=seam.auto_warmup))
    schedule_in_flow(patched.model.model_sampling, [0.5])  # refuses sampling types that are no noise schedule
    patched.model_options.setdefault("transformer_options", {})[SETTINGS_OPTION] = settings
    for wrapper_type, wrapper in (
        (comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, outer_sample_wrapper),
        (comfy.patcher_extension.WrappersMP.APPLY_MODEL, gate_model_call),
    ):
        patched.add_wrapper_with_key(wrapper_type, WRAPPER_KEY, wrapper)
    seam.attach(patched)
    return patched


class SeaCacheApply(io.ComfyNode):
    """Spectral-evolution-aware step cache for Cosmos3 and ComfyUI's diffusion models."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheApply",
            display_name="SeaCache Apply",
            category="SeaCache",
            description="Skip the model's transformer stack on steps where the SEA-filtered latent barely changed; "
            "the skipped output is extrapolated from earlier steps. Works on this pack's Cosmos3, the community "
            "ComfyUI-Cosmos3 MODEL, Wan 2.x, HunyuanVideo, LTX-Video, Flux, Qwen-Image (all blocks skipped) and, "
            "through the whole diffusion-model call, any other flow-matching or epsilon/v-prediction MODEL.",
            inputs=[
                io.Model.Input("model", tooltip="Any diffusion MODEL; SeaCache Stats names where the skipped stack begins and ends."),
                io.Float.Input("threshold", default=DEFAULTS.threshold, min=0.0, max=5.0, step=0.01, tooltip="Reuse while the accumulated distance stays below this: higher is faster, 0 never reuses; sea 0.25, first block 0.35."),
                io.Combo.Input("residual_order", options=list(RESIDUAL_CHOICES), default="auto", tooltip="Skipped-step prediction: 0 repeat, 1 linear, 2 quadratic, auto (2 on Cosmos3, else 1); chebyshev won only on Wan at 2x.", **EXPERT),
                io.Int.Input("max_consecutive", default=DEFAULTS.max_consecutive, min=-1, max=100, tooltip="Most reused steps in a row: 0 = never reuse (in diffusers 0 means no cap), -1 = no cap.", **EXPERT),
                io.Int.Input("warmup_steps", default=-1, min=-1, max=1000, tooltip="First steps always computed; -1 = auto: 4 on Wan below shift 3.9 and speedup 3.5, else 1.", **EXPERT),
                io.Int.Input("end_steps", default=DEFAULTS.end_steps, min=0, max=1000, tooltip="Last steps always computed.", **EXPERT),
                io.Float.Input("start_percent", default=0.0, min=0.0, max=1.0, step=0.01, tooltip="Sampling percent where reuse may begin (ComfyUI's convention: 0 = start of sampling).", **EXPERT),
                io.Float.Input("end_percent", default=1.0, min=0.0, max=1.0, step=0.01, tooltip="Sampling percent where reuse ends (1 = end of sampling).", **EXPERT),
                io.Combo.Input("filter_exponent", options=list(POWER_CHOICES), default=choice_label(POWER_CHOICES, DEFAULTS.power), tooltip="Exponent of the SEA filter's prior: auto = 3 for videos and the first-block gates, 2 for image latents.", **EXPERT),
                io.Combo.Input("residual_storage", options=list(STORAGE_CHOICES), default=choice_label(STORAGE_CHOICES, DEFAULTS.residual_storage), tooltip="Where the history of computed steps lives; cpu saves GPU memory at a small transfer cost."),
                io.Combo.Input("gate", options=list(GATE_CHOICES), default=choice_label(GATE_CHOICES, DEFAULTS.gate), optional=True, tooltip="What the gate reads: the latent (sea same-sigma, sea) or the first block's input (first block: the published indicator).", **EXPERT),
                io.Float.Input("speedup", default=DEFAULTS.speedup, min=0.0, max=5.0, step=0.05, optional=True, tooltip="Target stack speedup 1-5, steered per step, lifting max_consecutive if needed; below 1 = off (the threshold decides)."),
                io.Int.Input("min_steps", default=DEFAULTS.min_steps, min=0, max=1000, optional=True, tooltip="Runs of fewer sampling steps reuse nothing, where reuse costs more quality than it saves; 0 = no floor.", **EXPERT),
            ],
            outputs=[io.Model.Output(tooltip="A clone of the model with SeaCache; the input MODEL is unchanged.")],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, model, threshold, residual_order, max_consecutive, warmup_steps, end_steps, start_percent, end_percent, filter_exponent, residual_storage, gate=choice_label(GATE_CHOICES, GATE_BEFORE_INPUT), speedup=DEFAULTS.speedup, min_steps=MIN_STEPS_BEFORE_INPUT):
        seam_order = residual_order == "auto" or residual_order in FORECASTER_CHOICES
        config = SeaCacheConfig(
            threshold=threshold,
            order=1 if seam_order else int(residual_order),
            quadratic_weight=None if residual_order == "auto" else 1.0,  # auto's order 2 follows the schedule's shift
            forecaster=FORECASTER_CHOICES.get(residual_order, "newton"),
            max_consecutive=max_consecutive,
            warmup_steps=None if warmup_steps == AUTO_WARMUP else warmup_steps,
            end_steps=end_steps,
            power=POWER_CHOICES[filter_exponent],
            residual_storage=STORAGE_CHOICES[residual_storage],
            gate=GATE_CHOICES[gate],
            speedup=speedup,
            min_steps=min_steps,
        )
        unique_id = cls.hidden.unique_id if cls.hidden is not None else None
        settings = SeaCacheSettings(config, start_percent, end_percent, node_id=None if unique_id is None else str(unique_id))
        return io.NodeOutput(apply_seacache(model, settings, seam_order=seam_order))
