"""SeaCache Stats: the last run's timeline as text and as a chart IMAGE (for a preview or save node). On the node
itself the chart is drawn once, by the frontend extension (web/seacache.js) from the report in the node's UI data."""

from __future__ import annotations

import numpy as np
import torch

from comfy_api.latest import io

from .runtime import SETTINGS_OPTION
from .chart import render_timeline, summary_text


def last_report(model) -> dict | None:
    """The report the last sampling run with this SeaCache-patched model left (None before any run)."""
    settings = model.model_options.get("transformer_options", {}).get(SETTINGS_OPTION)
    if settings is None:
        raise ValueError("SeaCache Stats needs the MODEL output of SeaCache Apply (the one the sampler used).")
    return settings.last_run


class SeaCacheStats(io.ComfyNode):
    """Shows which steps SeaCache computed, reused or forced in the last run."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheStats",
            display_name="SeaCache Stats",
            category="SeaCache",
            description="Place after the sampler: passes the latent through and reports the last SeaCache run.",
            inputs=[
                io.Latent.Input("samples", tooltip="The sampler's output latent (passed through; it orders this node after sampling)."),
                io.Model.Input("model", tooltip="The MODEL output of SeaCache Apply that the sampler used."),
            ],
            outputs=[
                io.Latent.Output(display_name="samples"),
                io.String.Output(display_name="summary"),
                io.Image.Output(display_name="timeline"),
            ],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, samples, model):
        report = last_report(model)
        chart = render_timeline(report)
        image = torch.from_numpy(np.asarray(chart, dtype=np.float32) / 255.0)[None]
        return io.NodeOutput(samples, summary_text(report), image, ui={"seacache": [report or {}]})
