"""Per-run SeaCache state inside ComfyUI: created by an outer-sample wrapper, used by the model's seam
(:mod:`.seams`) on every model call, published to the SeaCache Stats node and freed when the run ends (also on
error)."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

from ..seacache_core import SeaCacheConfig, SeaCacheSession
from .run_scope import run_scoped_option

SETTINGS_KEY = "seacache"
RUN_KEY = "seacache_run"
PROGRESS_EVENT = "seacache.progress"


@dataclass
class SeaCacheSettings:
    """What SeaCache Apply configured, plus the slot where each finished run leaves its report.

    Shared (not copied) when ComfyUI deep-copies model options for a clone, so the Stats node reads the last
    run of this application whichever clone sampled it."""

    config: SeaCacheConfig
    start_percent: float = 0.0
    end_percent: float = 1.0
    node_id: str | None = None
    seam: str = ""
    last_run: dict | None = field(default=None, compare=False)

    def __deepcopy__(self, memo):
        return self

    def step_window(self, model_sampling, sigmas) -> tuple[float, float]:
        """The reuse window of this run as the session takes it (fractions ``step / steps``), from the node's
        ComfyUI sampling percents: the steps whose sigma lies between ``percent_to_sigma(start_percent)`` and
        ``percent_to_sigma(end_percent)``, as ComfyUI's own caches read them. 0 and 1 are the ends of any
        schedule, so the defaults allow the whole run."""
        schedule = [float(s) for s in sigmas.flatten().tolist()]
        steps = len(schedule) - 1
        high = math.inf if self.start_percent <= 0.0 else float(model_sampling.percent_to_sigma(self.start_percent))
        low = -math.inf if self.end_percent >= 1.0 else float(model_sampling.percent_to_sigma(self.end_percent))
        inside = [i for i, sigma in enumerate(schedule[:steps]) if low <= sigma <= high]
        if not inside:
            return 1.0, 1.0  # no step of the run reaches the fraction 1: nothing is reused
        return inside[0] / steps, inside[-1] / steps


def notify_frontend(data: dict) -> None:
    """Send a progress message to the browser tab that queued the prompt, when ComfyUI's server is running
    (nothing otherwise)."""
    server = sys.modules.get("server")
    instance = getattr(getattr(server, "PromptServer", None), "instance", None)
    if instance is not None:
        instance.send_sync(PROGRESS_EVENT, data, getattr(instance, "client_id", None))


@dataclass
class ComfyRun:
    """A session plus stable branch names: ComfyUI gives each conditioning entry a fresh uuid per run, which
    is mapped to "cond0", "uncond0", "cond1"... in order of appearance so identical runs report identically."""

    session: SeaCacheSession
    names: dict = field(default_factory=dict)

    def branch_keys(self, transformer_options: dict, batch: int) -> list[str]:
        """One key per batch item: the name of its conditioning entry and the item's index within it."""
        kinds = transformer_options.get("cond_or_uncond") or [0]
        uuids = transformer_options.get("uuids") or kinds
        per_chunk = max(batch // len(kinds), 1)
        keys = []
        for kind, uuid in zip(kinds, uuids):
            if uuid not in self.names:
                label = "cond" if kind == 0 else "uncond"
                self.names[uuid] = f"{label}{sum(n.startswith(label) for n in self.names.values())}"
            keys += [f"{self.names[uuid]}/{i}" for i in range(per_chunk)]
        return keys[:batch]

    def begin_call(self, transformer_options: dict, batch: int) -> list[str]:
        """Learn the run's schedule on its first call; the branch keys of this call's batch items."""
        if self.session.schedule is None and transformer_options.get("sample_sigmas") is not None:
            self.session.set_schedule(transformer_options["sample_sigmas"])
        return self.branch_keys(transformer_options, batch)

    def end_call(self, settings: "SeaCacheSettings") -> None:
        """Tell the canvas node how many calls were reused so far (when the node id is known)."""
        if settings.node_id is not None and self.session.stats.calls:
            stats = self.session.stats
            notify_frontend({"node": settings.node_id, "reused": stats.reused, "calls": stats.calls, "step": stats.records[-1].step, "steps": self.session.steps})


def outer_sample_wrapper(executor, *args, **kwargs):
    """Create the run's session for this sampling run only; publish its report and free it however it ends."""
    guider = executor.class_obj
    settings: SeaCacheSettings = guider.model_options["transformer_options"][SETTINGS_KEY]
    sigmas = args[3] if len(args) > 3 else kwargs["sigmas"]
    model_sampling = guider.model_patcher.get_model_object("model_sampling")
    session = SeaCacheSession(settings.config, *settings.step_window(model_sampling, sigmas))
    status = "failed"
    try:
        with run_scoped_option(guider, RUN_KEY, ComfyRun(session)):
            out = executor(*args, **kwargs)
        status = "completed"
        return out
    finally:
        settings.last_run = {**session.report(status), "seam": settings.seam}
        session.release()
