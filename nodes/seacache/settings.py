"""What SeaCache Apply configured on a MODEL, and where each finished run of it leaves its report."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from comfy_execution.utils import get_executing_context

from ...seacache_core import SeaCacheConfig

SETTINGS_OPTION = "seacache_settings"
"""transformer_options key holding SeaCache Apply's :class:`SeaCacheSettings` on the patched MODEL."""


@dataclass
class SeaCacheSettings:
    """SeaCache Apply's configuration, its reuse window in ComfyUI's sampling percents (0 = start of sampling, as
    ComfyUI's own caches read them), and the reports of its runs: ``runs`` by the ComfyUI node that sampled (so each
    Stats node reads the run whose latent it receives, however many samplers share this MODEL) and ``last_run``
    (the latest of any, for callers outside ComfyUI's executor).

    Shared, not copied, when ComfyUI deep-copies model options for a clone, so the Stats node finds the runs of this
    application whichever clone sampled them."""

    config: SeaCacheConfig
    start_percent: float = 0.0
    end_percent: float = 1.0
    node_id: str | None = None
    last_run: dict | None = field(default=None, compare=False)
    runs: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.start_percent <= self.end_percent <= 1.0:
            raise ValueError(f"start_percent ({self.start_percent}) and end_percent ({self.end_percent}) must satisfy "
                             f"0 <= start <= end <= 1.")

    def __deepcopy__(self, memo):
        return self

    def publish(self, report: dict) -> None:
        """Keep a finished run's report as the latest and, inside ComfyUI's executor, as the sampling node's."""
        self.last_run = report
        context = get_executing_context()
        if context is not None:
            self.runs.pop(context.node_id, None)  # newest last
            self.runs[context.node_id] = report

    def reuse_steps(self, model_sampling, sigmas) -> range:
        """The steps of this run where reuse may happen: those whose sigma lies between
        ``percent_to_sigma(start_percent)`` and ``percent_to_sigma(end_percent)``. 0 and 1 are the ends of any
        schedule, so the defaults allow the whole run; a window no step reaches allows none."""
        schedule = [float(s) for s in sigmas.flatten().tolist()][:-1]
        high = math.inf if self.start_percent <= 0.0 else float(model_sampling.percent_to_sigma(self.start_percent))
        low = -math.inf if self.end_percent >= 1.0 else float(model_sampling.percent_to_sigma(self.end_percent))
        inside = [i for i, sigma in enumerate(schedule) if low <= sigma <= high]
        return range(inside[0], inside[-1] + 1) if inside else range(0)
