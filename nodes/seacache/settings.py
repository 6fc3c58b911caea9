"""What SeaCache Apply configured on a MODEL, and the reports its runs leave."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from comfy_execution.utils import get_executing_context

from ...seacache_core import SeaCacheConfig

SETTINGS_OPTION = "seacache_settings"  # transformer_options key of the patched MODEL's SeaCacheSettings


@dataclass
class SeaCacheSettings:
    """SeaCache Apply's config, reuse window (sampling percents) and its runs' reports, by sampling node (each Stats
    node reads its own) and latest; shared, not copied, by deep copies of the model options."""

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
        """Keep a run's report as the latest and as its sampling node's."""
        self.last_run = report
        context = get_executing_context()
        if context is not None:
            self.runs.pop(context.node_id, None)  # newest last
            self.runs[context.node_id] = report

    def reuse_steps(self, model_sampling, sigmas) -> range:
        """The steps whose sigma lies in the reuse window (the defaults allow every step)."""
        schedule = [float(s) for s in sigmas.flatten().tolist()][:-1]
        high = math.inf if self.start_percent <= 0.0 else float(model_sampling.percent_to_sigma(self.start_percent))
        low = -math.inf if self.end_percent >= 1.0 else float(model_sampling.percent_to_sigma(self.end_percent))
        inside = [i for i, sigma in enumerate(schedule) if low <= sigma <= high]
        return range(inside[0], inside[-1] + 1) if inside else range(0)
