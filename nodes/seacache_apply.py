"""SeaCache Apply: patch a Cosmos3 MODEL clone so each step's generator stack may be skipped."""

from __future__ import annotations

import comfy.patcher_extension
from comfy_api.latest import io

from ..seacache_core import SeaCacheConfig, validate_window
from .cosmos3_model import GEN_STACK_WRAPPER, Cosmos3
from .seacache_runtime import SETTINGS_KEY, SeaCacheSettings, gen_stack_wrapper, outer_sample_wrapper

WRAPPER_KEY = "seacache"
POWER_CHOICES = {"auto": None, "3 (video)": 3.0, "2 (image)": 2.0}


def apply_seacache(model, settings: SeaCacheSettings):
    """A clone of ``model`` with SeaCache installed (replacing an earlier application); ``model`` is untouched."""
    if not isinstance(getattr(model, "model", None), Cosmos3):
        kind = type(getattr(model, "model", model)).__name__
        raise ValueError(
            f"SeaCache Apply supports Cosmos3 models loaded by 'Cosmos3 Loader' (this pack); got a {kind} model. "
            "Connect the MODEL output of Cosmos3 Loader."
        )
    patched = model.clone()
    for wrapper_type in (comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, GEN_STACK_WRAPPER):
        patched.remove_wrappers_with_key(wrapper_type, WRAPPER_KEY)
    patched.model_options.setdefault("transformer_options", {})[SETTINGS_KEY] = settings
    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, WRAPPER_KEY, outer_sample_wrapper)
    patched.add_wrapper_with_key(GEN_STACK_WRAPPER, WRAPPER_KEY, gen_stack_wrapper)
    return patched


class SeaCacheApply(io.ComfyNode):
    """Spectral-evolution-aware step cache for Cosmos3 (training-free, no calibration)."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheApply",
            display_name="SeaCache Apply",
            category="SeaCache",
            description="Skip the Cosmos3 generator stack on steps where the SEA-filtered latent barely changed; "
            "the skipped output is extrapolated from earlier steps.",
            inputs=[
                io.Model.Input("model", tooltip="A Cosmos3 MODEL from Cosmos3 Loader."),
                io.Float.Input("threshold", default=0.25, min=0.0, max=5.0, step=0.01, tooltip="Reuse while the accumulated SEA distance stays below this; higher = faster, 0 = never reuse (exact)."),
                io.Combo.Input("residual_order", options=["0", "1", "2"], default="1", tooltip="Extrapolation of skipped steps: 0 = repeat last residual, 1 = linear, 2 = quadratic."),
                io.Int.Input("max_consecutive", default=2, min=-1, max=100, tooltip="Most reused steps in a row (0 = never reuse, -1 = no cap)."),
                io.Int.Input("warmup_steps", default=1, min=0, max=1000, tooltip="First steps always computed."),
                io.Int.Input("end_steps", default=1, min=0, max=1000, tooltip="Last steps always computed."),
                io.Float.Input("start_percent", default=0.0, min=0.0, max=1.0, step=0.01, tooltip="Reuse allowed from this fraction of the steps on."),
                io.Float.Input("end_percent", default=1.0, min=0.0, max=1.0, step=0.01, tooltip="Reuse allowed up to this fraction of the steps."),
                io.Combo.Input("filter_exponent", options=list(POWER_CHOICES), default="auto", tooltip="Power-law exponent of the SEA filter: auto = 3 for video, 2 for a single frame."),
                io.Combo.Input("residual_storage", options=["compute device", "cpu"], default="compute device", tooltip="Where the residual history lives; cpu saves GPU memory at a small transfer cost."),
            ],
            outputs=[io.Model.Output(tooltip="The Cosmos3 model with SeaCache.")],
            hidden=[io.Hidden.unique_id],
        )

    @classmethod
    def execute(cls, model, threshold, residual_order, max_consecutive, warmup_steps, end_steps, start_percent, end_percent, filter_exponent, residual_storage):
        validate_window(start_percent, end_percent)
        config = SeaCacheConfig(
            threshold=threshold,
            order=int(residual_order),
            max_consecutive=max_consecutive,
            warmup_steps=warmup_steps,
            end_steps=end_steps,
            power=POWER_CHOICES[filter_exponent],
            residual_device="cpu" if residual_storage == "cpu" else "compute",
        )
        unique_id = cls.hidden.unique_id if cls.hidden is not None else None
        settings = SeaCacheSettings(config, start_percent, end_percent, node_id=None if unique_id is None else str(unique_id))
        return io.NodeOutput(apply_seacache(model, settings))
