"""SeaCache inside ComfyUI's sampler: the run-start wrapper (``OUTER_SAMPLE``) and the per-call wrapper
(``APPLY_MODEL``), one protocol for every model. The seam (:mod:`.seams`) says where the stack begins and ends; the run
decides, predicts and commits; failures follow docs/algorithm.md §8."""

from __future__ import annotations

import logging
import math
import sys
import threading
from contextlib import nullcontext
from functools import partial

import comfy.model_management
import comfy.patcher_extension
import torch

from ...seacache_core import Call, SeaCacheRun
from ...seacache_core.run import agreed_reuse
from ..run_scope import run_scoped_option
from .composition import GUIDANCE_OPTION, mark_guidance_calls, options_signature, refuse_other_caches
from .estimate import counting_kept_memory, kept_bytes
from .run_inputs import refuse_bad_run_inputs, refuse_unreachable_first_block
from .seams import select_seam
from .seams.base import CALL_OPTION, WINDOWED_STEP_OPTION, WRAPPER_KEY, RunStart, Seam
from .settings import SETTINGS_OPTION, SeaCacheSettings

log = logging.getLogger(__name__)

RUN_OPTION = "seacache_run"  # transformer_options key of the SamplingRun during sampling
PROGRESS_EVENT = "seacache.progress"
HALF = (torch.float16, torch.bfloat16)


def flow_scale_and_sigma(model_sampling, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scale, sigma_flow)`` with ``scale x = (1 - sigma_flow) x0 + sigma_flow eps``, read off the model's
    ``noise_scaling`` (float64, no host read; docs/algorithm.md §2)."""
    sigma = sigma.reshape(1).to(torch.float64)
    one, zero = torch.ones_like(sigma), torch.zeros_like(sigma)
    a = model_sampling.noise_scaling(sigma, one.clone(), zero.clone())
    b = model_sampling.noise_scaling(sigma, zero.clone(), one.clone())
    return 1.0 / (a + b), a / (a + b)


def schedule_in_flow(model_sampling, sigmas) -> list[float]:
    """The schedule's flow sigmas (host floats); ValueError for a sampling that mixes no latent and noise."""
    flow = []
    for sigma in torch.as_tensor(sigmas, dtype=torch.float64).flatten():
        scale, flow_sigma = (float(v) for v in flow_scale_and_sigma(model_sampling, sigma))
        if not (math.isfinite(scale) and scale > 0 and 0.0 <= flow_sigma <= 1.0):
            raise ValueError(
                f"SeaCache Apply needs a flow-matching or epsilon/v-prediction model; this model's sampling "
                f"({type(model_sampling).__name__}) does not mix clean latent and noise at sigma {float(sigma):g} "
                f"(latent scale {scale}, noise share {flow_sigma}).")
        flow.append(flow_sigma)
    return flow


def gate_input(base_model, x: torch.Tensor, t: torch.Tensor):
    """``(latent, sound, sigma, filter_sigma)`` the gate reads of a model call, in the flow convention: the video (and
    Cosmos3's ``[B, C, T]`` sound), sigma a one-value device tensor (a host float without float64: MPS)."""
    video, sound, shapes = x, None, getattr(base_model, "latent_shapes", None)
    if shapes is not None and len(shapes) >= 2 and x.ndim == 3:
        cuts = [math.prod(tuple(shape)[1:]) for shape in shapes]
        video = x[:, :, : cuts[0]].reshape(x.shape[0], *tuple(shapes[0])[1:])
        if len(shapes) == 2 and len(shapes[1]) == 3:
            sound = x[:, :, cuts[0] : cuts[0] + cuts[1]].reshape(x.shape[0], *tuple(shapes[1])[1:])
    sigma = t.flatten()[:1]
    if sigma.device.type in ("cuda", "cpu"):
        scale, filter_sigma = flow_scale_and_sigma(base_model.model_sampling, sigma)
        streams = [s if s is None else (s.to(torch.float32 if s.dtype in HALF else s.dtype)
                   * scale.to(torch.float32 if s.dtype in HALF else s.dtype)).to(s.dtype) for s in (video, sound)]
    else:
        sigma = float(sigma)
        scale, filter_sigma = (float(v) for v in flow_scale_and_sigma(base_model.model_sampling,
                                                                      torch.tensor(sigma, dtype=torch.float64)))
        streams = [s if s is None or scale == 1.0 else s * scale for s in (video, sound)]
    return streams[0], streams[1], sigma, filter_sigma


class SamplingRun:
    """One ComfyUI sampling run: the core run (``gate``), the seam, the sampler's own patches, stable branch names
    ("cond0/0"; identical runs report identically) and the host's counts, under the run's lock."""

    def __init__(self, settings: SeaCacheSettings, seam: Seam, sigmas: torch.Tensor, model_sampling):
        self.gate = SeaCacheRun(settings.config, sigmas, settings.reuse_steps(model_sampling, sigmas),
                                schedule_in_flow(model_sampling, sigmas))
        self.settings, self.seam = settings, seam
        self.lock = threading.Lock()
        self.patches_signature: dict = {}  # the sampler's own replacement patches (set at run start)
        self.guided = False
        self.names: dict = {}
        self.windows: dict = {}
        self.guidance_names: dict[str, str] = {}  # a follower's patch set -> "g0"...
        self.uncached_calls = 0
        self.guidance_calls = self.guidance_followed = self.guidance_reused = 0
        self.stopped: str | None = None

    def stop_caching(self, error: Exception, step: int | None = None) -> None:
        """SeaCache's own code raised: every later call of this run computes whole; logged once."""
        with self.lock:
            if self.stopped is not None:
                return
            self.stopped = f"{'during sampling' if step is None else f'at step {step}'}: {type(error).__name__}: {error}"
        log.warning("SeaCache stopped caching %s; the rest of this run is computed whole (outputs stay exact).",
                    self.stopped, exc_info=error)

    def branch_keys(self, transformer_options: dict, batch: int) -> list[str]:
        """One key per item: its conditioning entry's name, its index, and its static window."""
        cond_or_uncond = transformer_options.get("cond_or_uncond") or [0]
        uuids = transformer_options.get("uuids") or cond_or_uncond
        per_chunk = max(batch // len(cond_or_uncond), 1)
        window = getattr(transformer_options.get("context_window"), "index_list", None)
        window = "" if window is None else "@" + self.windows.setdefault(tuple(window), f"w{len(self.windows)}")
        keys = []
        for kind, uuid in zip(cond_or_uncond, uuids):
            if uuid not in self.names:
                label = "cond" if kind == 0 else "uncond"
                self.names[uuid] = f"{label}{sum(n.startswith(label) for n in self.names.values())}"
            keys += [f"{self.names[uuid]}/{item}{window}" for item in range(per_chunk)]
        return keys[:batch]

    def start_call(self, transformer_options: dict, base_model, x: torch.Tensor, t: torch.Tensor,
                   key_options: dict | None = None) -> tuple[Call | None, bool]:
        """``(call, guidance)``: a guidance call (inside a guidance function, or with other patches than the run's) is
        not started; else the call's verdict (pending under a first-block gate), branches named from ``key_options``;
        None when it runs whole (counted). Ranks still agree."""
        if transformer_options.get(GUIDANCE_OPTION, False) or \
                options_signature(transformer_options) != self.patches_signature:
            return None, True
        call = None
        if self.stopped is not None:
            agreed_reuse(False, x.device)
        else:
            try:
                latent, sound, sigma, filter_sigma = gate_input(base_model, x, t)
                with self.lock:
                    keys = self.branch_keys(key_options or transformer_options, x.shape[0])
                if self.gate.indicator.reads_first_block:
                    call = self.gate.pending(sigma, keys, filter_sigma)
                else:
                    call = Call(self.gate, self.gate.decide(latent, sigma, keys, filter_sigma, sound))
            except Exception as exc:  # SeaCache's decision failed: this call and the rest run whole
                self.stop_caching(exc)
        if call is None:
            with self.lock:
                self.uncached_calls += 1
        return call, False

    def start_follower(self, transformer_options: dict, x: torch.Tensor, t: torch.Tensor) -> Call | None:
        """A skip-layer pass's call, following its step's main call; None: it runs plain."""
        if self.stopped is not None:
            return None
        try:
            signature = options_signature(transformer_options)
            if signature == self.patches_signature:
                return None
            with self.lock:
                name = self.guidance_names.setdefault(repr(signature), f"g{len(self.guidance_names)}")
                leaders = self.branch_keys(transformer_options, x.shape[0])
            return Call(self.gate, self.gate.follow([f"{key}+{name}" for key in leaders], leaders, float(t.flatten()[0])))
        except Exception as exc:
            self.stop_caching(exc)
            return None

    def gate_windows(self, transformer_options: dict, base_model, x_in: torch.Tensor, t: torch.Tensor,
                     active: list[int], evaluate):
        """A step of moving context windows gated as one call: ``evaluate(call)`` runs its windows."""
        lists = {"cond_or_uncond": active, "uuids": [("conditioning list", i) for i in active]}
        call, _ = self.start_call(transformer_options, base_model, torch.cat([x_in] * len(active)), t, lists)
        if call is None:
            return evaluate(None)
        out = evaluate(call)
        self.end_call(call)
        return out

    def end_call(self, call: Call | None, guidance: bool = False) -> None:
        """After a model call: stop caching on a failure, count the call, tell the canvas."""
        verdict = None if call is None else call.verdict
        if call is not None and call.failure is not None:
            self.stop_caching(call.failure, None if verdict is None else verdict.step)
        committed = verdict is not None and verdict.committed
        with self.lock:
            if guidance:
                self.guidance_calls += 1
                if committed and not all(plan.frozen for plan in verdict.branches):
                    self.guidance_followed += 1
                    self.guidance_reused += bool(call.stack_skipped)
                return
            self.uncached_calls += not committed
        server = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
        stats = self.gate.stats
        if server is not None and self.settings.node_id is not None and stats.calls:
            server.send_sync(PROGRESS_EVENT, {"node": self.settings.node_id, "reused": stats.reused,
                                              "calls": stats.calls, "step": stats.records[-1].step,
                                              "steps": self.gate.steps}, getattr(server, "client_id", None))

    def report(self, status: str) -> dict:
        """The core run's report plus the host's counts and the seam."""
        return {**self.gate.report(status), "uncached_calls": self.uncached_calls,
                "guidance_calls": self.guidance_calls, "guidance_followed": self.guidance_followed,
                "guidance_reused": self.guidance_reused, "stopped": self.stopped, "seam": self.seam.name}


def gate_model_call(executor, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
    """``APPLY_MODEL`` wrapper: the model runs with the call's verdict handed to the seam."""
    run: SamplingRun | None = transformer_options.get(RUN_OPTION)
    if run is None:
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
    base_model = executor.class_obj
    windowed = transformer_options.get(WINDOWED_STEP_OPTION)
    if windowed is not None:
        call, guidance = windowed.view(transformer_options, x), False
    else:
        call, guidance = run.start_call(transformer_options, base_model, x, t)
        if guidance:
            call = run.start_follower(transformer_options, x, t)
    if call is None:
        if guidance:
            run.end_call(None, guidance=True)
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
    options = {**transformer_options, CALL_OPTION: call}
    with run.seam.bind(base_model, call) if run.seam.bind is not None else nullcontext():
        out = executor(x, t, c_concat, c_crossattn, control, options, **kwargs)
    if windowed is None:
        run.end_call(call, guidance)
    return out


def log_run(model_name: str, report: dict) -> None:
    """One INFO line per run (status, model, seam, counts, speedup) and one warning when calls missed the seam and ran
    whole, uncached (otherwise only the Stats node would show a run that gained nothing)."""
    log.info("SeaCache: %s run of %s, seam %s: %d calls, %d ran, %d reused, estimated stack speedup %.2fx",
             report["status"], model_name, report["seam"], report["calls"], report["ran"], report["reused"],
             report["speedup"])
    if report["uncached_calls"] and report["stopped"] is None:  # a stop has logged its own warning
        log.warning("SeaCache: %d of %d model calls of %s ran whole, uncached: they did not pass the seam (%s). "
                    "A node that changes the model's forward can cause this; SeaCache Stats shows the run.",
                    report["uncached_calls"], report["calls"] + report["uncached_calls"], model_name, report["seam"])


def outer_sample_wrapper(executor, *args, **kwargs):
    """Run start: refuse what cannot be honoured, choose the seam for the final MODEL, create the run; publish its
    report and free its state however the run ends."""
    guider = executor.class_obj
    settings: SeaCacheSettings = guider.model_options["transformer_options"][SETTINGS_OPTION]
    refuse_other_caches(guider.model_patcher, guider.model_options)
    seam = select_seam(guider.model_patcher, guider.model_options)
    refuse_unreachable_first_block(settings.config, seam, guider.conds)
    sigmas, channels = refuse_bad_run_inputs(args, kwargs)
    run = SamplingRun(settings, seam, sigmas, guider.model_patcher.get_model_object("model_sampling"))
    status = "failed"
    try:
        with run_scoped_option(guider, RUN_OPTION, run):
            seam.enter_run(guider.model_options, RunStart(channels, run.gate_windows))
            run.patches_signature = options_signature(guider.model_options["transformer_options"])
            run.guided = mark_guidance_calls(guider.model_options)
            kept = counting_kept_memory(partial(kept_bytes, seam, settings.config, run.guided))
            comfy.patcher_extension.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.PREPARE_SAMPLING,
                                                         WRAPPER_KEY, kept, guider.model_options, is_model_options=True)
            out = executor(*args, **kwargs)
        status = "completed"
        return out
    except comfy.model_management.InterruptProcessingException:
        status = "interrupted"  # the user's cancel, not a failure
        raise
    finally:
        settings.publish(run.report(status))
        run.gate.release()
        log_run(type(guider.model_patcher.model).__name__, settings.last_run)
