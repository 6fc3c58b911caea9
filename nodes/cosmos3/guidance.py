"""Cosmos3 CFG Guider: classifier-free guidance only inside a range of pipeline timesteps, as the Cosmos3
Text2Image recipe runs it (CFG for timesteps in [400, 1000], the conditional prediction alone below 400)."""

from __future__ import annotations

import comfy.samplers
from comfy_api.latest import io

from ...cosmos3.presets import TIMESTEP_SCALE, guidance_active

TIMESTEP_MAX = int(TIMESTEP_SCALE)  # pipeline timestep = 1000 * sigma


def check_interval(start: int, end: int) -> None:
    """Raise naming the problem and the fix unless ``0 <= start <= end <= 1000``."""
    if not (0 <= start <= TIMESTEP_MAX and 0 <= end <= TIMESTEP_MAX):
        raise ValueError(
            f"Cosmos3 CFG Guider: interval_start {start} and interval_end {end} must lie in [0, {TIMESTEP_MAX}] "
            "(pipeline timesteps, 1000 * sigma)."
        )
    if start > end:
        raise ValueError(
            f"Cosmos3 CFG Guider: interval_start {start} is above interval_end {end}; swap them "
            f"(Text2Image reference: 400 to 1000; 0 to {TIMESTEP_MAX} applies CFG on every step)."
        )


class IntervalCFGGuider(comfy.samplers.CFGGuider):
    """CFGGuider whose cfg applies only while the pipeline timestep lies in ``[start, end]`` (ends included, as in
    diffusers' Cosmos3 guidance interval); other steps run at cfg 1, where ComfyUI skips the negative prompt's
    model call and the result is the positive prediction alone."""

    interval: tuple[int, int] = (0, TIMESTEP_MAX)

    def set_interval(self, start: int, end: int) -> None:
        """Limit guidance to pipeline timesteps ``start..end`` (validated)."""
        check_interval(start, end)
        self.interval = (start, end)

    def predict_noise(self, x, timestep, model_options={}, seed=None):
        """One guided prediction; ``timestep`` is ComfyUI's sigma per batch item (all equal within a step)."""
        cfg = self.cfg if guidance_active(timestep.reshape(-1)[0].item(), self.interval) else 1.0
        return comfy.samplers.sampling_function(
            self.inner_model, x, timestep, self.conds.get("negative", None), self.conds.get("positive", None), cfg,
            model_options=model_options, seed=seed,
        )


class Cosmos3CFGGuider(io.ComfyNode):
    """CFG Guider with a guidance interval in pipeline timesteps."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheCosmos3CFGGuider",
            display_name="Cosmos3 CFG Guider",
            category="SeaCache/Cosmos3",
            description="Classifier-free guidance only for pipeline timesteps (1000 * sigma) in "
            "[interval_start, interval_end]; other steps run the positive prompt alone (one model call instead "
            "of two). Cosmos3 Text2Image reference: CFG 7 in [400, 1000]. 0 to 1000 = plain CFG (video).",
            inputs=[
                io.Model.Input("model", tooltip="The model to sample (e.g. from Cosmos3 Loader or SeaCache Apply)."),
                io.Conditioning.Input("positive", tooltip="The prompt to follow (Cosmos3 Prompt Encode)."),
                io.Conditioning.Input("negative", tooltip="The prompt to steer away from (Cosmos3 Prompt Encode (Negative)); unused outside the interval."),
                io.Float.Input("cfg", default=7.0, min=0.0, max=100.0, step=0.1, round=0.01, tooltip="Guidance scale inside the interval (outside it the step runs at 1)."),
                io.Int.Input("interval_start", default=0, min=0, max=TIMESTEP_MAX, tooltip="Lowest pipeline timestep (1000 * sigma, truncated as the reference scheduler does) that gets CFG. Text2Image reference: 400."),
                io.Int.Input("interval_end", default=TIMESTEP_MAX, min=0, max=TIMESTEP_MAX, tooltip="Highest pipeline timestep that gets CFG, included. 1000 with interval_start 0 = CFG on every step (video default)."),
            ],
            outputs=[io.Guider.Output()],
        )

    @classmethod
    def execute(cls, model, positive, negative, cfg, interval_start, interval_end) -> io.NodeOutput:
        check_interval(interval_start, interval_end)
        guider = IntervalCFGGuider(model)
        guider.set_conds(positive, negative)
        guider.set_cfg(cfg)
        guider.set_interval(interval_start, interval_end)
        return io.NodeOutput(guider)
