"""SeaCache Stats: the timeline of the run whose latent it receives, as text and as a chart IMAGE (for a preview or
save node). On the node itself the chart is drawn once, by the frontend extension (web/seacache.js) from the report
in the node's UI data, which carries the chart's colors (:func:`.chart.frontend_report`)."""

from __future__ import annotations

import numpy as np
import torch

from comfy_api.latest import io

from .settings import SETTINGS_OPTION
from .chart import NOT_APPLIED, frontend_report, render_timeline, summary_text


def followed_report(settings, prompt: dict | None = None, stats_id: str | None = None) -> dict | None:
    """The run of the nearest sampler upstream of ``samples`` that used these ``settings`` (two samplers fed by one
    SeaCache Apply report to their own Stats nodes); without one, the model's latest run (None before any)."""
    runs = dict(settings.runs)
    if prompt and runs and stats_id in prompt:
        queue, seen = [prompt[stats_id]["inputs"].get("samples")], set()
        while queue:
            link = queue.pop(0)
            if not (isinstance(link, list) and len(link) == 2) or str(link[0]) in seen:
                continue
            node = str(link[0])
            seen.add(node)
            expanded = [key for key in runs if key.startswith(node + ".")]  # a node expanded into a subgraph
            if node in runs or expanded:
                return runs[node] if node in runs else runs[expanded[-1]]
            queue += list(prompt.get(node, {}).get("inputs", {}).values())
    return settings.last_run


class SeaCacheStats(io.ComfyNode):
    """Shows which steps SeaCache computed, reused or forced in the run that produced its latent."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="SeaCacheStats",
            display_name="SeaCache Stats",
            category="SeaCache",
            description="Place after the sampler: passes the latent through and reports the SeaCache run that produced it.",
            inputs=[
                io.Latent.Input("samples", tooltip="The sampler's output latent (passed through; it orders this node after sampling)."),
                io.Model.Input("model", optional=True,
                               tooltip="The MODEL output of SeaCache Apply that the sampler used. Without SeaCache on "
                                       "it (Apply bypassed or removed) the latent passes through and the node says so."),
            ],
            outputs=[
                io.Latent.Output(display_name="samples"),
                io.String.Output(display_name="summary"),
                io.Image.Output(display_name="timeline"),
            ],
            hidden=[io.Hidden.unique_id, io.Hidden.prompt],
            is_output_node=True,
        )

    @classmethod
    def execute(cls, samples, model=None):
        """Never fails the prompt: without SeaCache on ``model`` the latent passes through, saying so."""
        settings = getattr(model, "model_options", {}).get("transformer_options", {}).get(SETTINGS_OPTION)
        hidden = cls.hidden
        prompt, unique_id = (hidden.prompt, hidden.unique_id) if hidden is not None else (None, None)
        report = None if settings is None else followed_report(settings, prompt, None if unique_id is None else str(unique_id))
        note = NOT_APPLIED if settings is None else None
        chart = render_timeline(report, note=note)
        image = torch.from_numpy(np.asarray(chart, dtype=np.float32) / 255.0)[None]
        summary = note or summary_text(report)
        return io.NodeOutput(samples, summary, image, ui={"seacache": [frontend_report(report, note)]})
