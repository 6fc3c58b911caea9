"""The SeaCache runtime inside ComfyUI: one protocol for every model. A seam (:mod:`.seams`) only says where the
skippable stack begins and ends and how to run it; this module owns decide -> compute or predict -> commit.

Per sampling run, :func:`outer_sample_wrapper` (run start, when every patch of the final MODEL is known) refuses
what cannot be honoured (:mod:`.composition`), chooses the seam for the final MODEL, lets it place its run-time
hooks in the run's private model options, and creates the run's :class:`SeaCacheRun`; the run publishes its report
to the Stats node and frees its state however it ends. Per model call, :func:`gate_model_call` (``APPLY_MODEL``)
decides on the sampler's latent (a ``seacache_core.GatedCall``, the one per-call protocol) and hands it as a
:class:`.call.StackCall` to the seam, which enters the stack (the predicted output on a reused call) or runs it and
leaves it (the residual is committed). Each run ends with one INFO log line, and one warning when calls ran whole
because they missed the seam.

Failure behaviour, the same for every seam:

- Bad settings, a MODEL that is no diffusion model, another step cache on the MODEL, or run inputs SeaCache cannot
  serve (a latent that is not 4-D or 5-D, NaN/Inf in latent, noise or sigmas, a rising schedule:
  :mod:`.run_inputs`): ValueError at Apply or at run start, before the first step, naming the problem and the fix;
  the input MODEL is unchanged.
- A call that never passes the seam (a code path the seam does not know, an output that does not match the
  latent): it ran whole, so its output is exact; the gate forgets it and the report counts it in
  ``uncached_calls``. Never an error in the middle of sampling.
- Model calls with other replacement patches than the sampler's (skip-layer guidance, perturbed attention: other
  ``patches_replace``) follow the step's main call: each of their items has its own branch (its conditioning's
  key plus a name for the patch set, "cond0/0+g0") and residual history, and reuses exactly when its
  conditioning's branch reused at this step (``SeaCacheGate.follow``), so its error moves with the main call's
  instead of meeting a predicted cond with an exact skip pass. Other calls made by a guidance function (pre- or
  post-CFG) run whole and leave gate and history untouched. All are counted in ``guidance_calls``; the report's
  ``guidance_followed`` and ``guidance_reused`` say how many followed and how many of those reused.
- A context window whose rows or frames cannot be mapped to the step's latent runs whole; its step is then not
  committed (counted in ``uncached_calls``).
- An error raised by the model itself propagates; the report says "failed"; the run's state is freed.
- An error raised by SeaCache's own code during sampling (the gate at a call, or a seam's step inside the model):
  that call runs whole, so do all later calls of the run; the report's ``stopped`` says why and one warning is
  logged. The run completes with exact outputs from then on.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
import threading
from contextlib import nullcontext
from dataclasses import dataclass, field

import comfy.model_management
from comfy_execution.utils import get_executing_context

from ...seacache_core import GatedCall, SeaCacheConfig, SeaCacheSession
from ...seacache_core.ranks import agreed_reuse
from ..run_scope import run_scoped_option
from .call import CALL_OPTION, RUN_OPTION, StackCall, branch_key
from .composition import GUIDANCE_OPTION, mark_guidance_calls, options_signature, refuse_other_caches
from .run_inputs import refuse_bad_run_inputs
from .sampling import av_streams, flow_scale_and_sigma, flow_scale_and_sigma_on_device, latent_channels, scaled
from .seams import select_seam
from .seams.base import Seam

log = logging.getLogger(__name__)

SETTINGS_OPTION = "seacache_settings"
"""transformer_options key holding SeaCache Apply's :class:`SeaCacheSettings` on the patched MODEL."""
PROGRESS_EVENT = "seacache.progress"
ESTIMATE_LOCK = threading.RLock()
"""Held while a run's memory estimate shadows ``memory_required`` on the (shared) model instance."""


@dataclass
class SeaCacheSettings:
    """What SeaCache Apply configured, plus where each finished run leaves its report: ``runs`` by the ComfyUI
    node that sampled (so each Stats node reads the run whose latent it receives, however many samplers share
    this MODEL), and ``last_run`` (the latest of any, for callers outside ComfyUI's executor).

    Shared (not copied) when ComfyUI deep-copies model options for a clone, so the Stats node finds the runs of
    this application whichever clone sampled them."""

    config: SeaCacheConfig
    start_percent: float = 0.0
    end_percent: float = 1.0
    node_id: str | None = None
    last_run: dict | None = field(default=None, compare=False)
    runs: dict = field(default_factory=dict, compare=False)

    def publish(self, report: dict) -> None:
        """Keep a finished run's report as the latest and, inside ComfyUI's executor, as the sampling node's."""
        self.last_run = report
        context = get_executing_context()
        if context is not None:
            self.runs.pop(context.node_id, None)  # newest last
            self.runs[context.node_id] = report

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


class SeaCacheRun:
    """One sampling run: the session (gate, schedule, window), the seam chosen at run start, stable branch names
    and the counts of calls that ran uncached. Safe under concurrent calls (ComfyUI's multi-GPU CFG split runs
    cond and uncond in threads): every use of the gate and of the run's counts holds the session's ``lock``; each
    residual stays on its call's device.

    ComfyUI gives each conditioning entry a fresh uuid per run; branches are named "cond0", "uncond0", "cond1"...
    in order of appearance (and "w0", "w1"... per context window) so identical runs report identically."""

    def __init__(self, session: SeaCacheSession, seam: Seam, settings: SeaCacheSettings):
        self.session, self.seam, self.settings = session, seam, settings
        self.patches_signature: dict = {}  # the replacement patches of the sampler's own calls (set at run start)
        self.lock = session.lock
        self.names: dict = {}
        self.windows: dict = {}
        self.uncached_calls = 0
        self.guidance_calls = 0  # every guidance call; of them, followers that passed the seam and those reused:
        self.guidance_followed = 0
        self.guidance_reused = 0
        self.guidance_signatures: dict[str, str] = {}  # the patch set of each kind of follower -> its name "g0"...
        self.guided = False  # the run has guidance functions (set at run start): the estimate counts followers
        self.stopped: str | None = None  # why SeaCache stopped caching mid-run (its own code raised); None: it did not

    def stop_caching(self, error: Exception, step: int | None = None) -> None:
        """SeaCache's own code raised during sampling (in the call at ``step`` when known): every later call of
        this run computes whole. Logged once."""
        with self.lock:
            if self.stopped is not None:
                return
            where = "during sampling" if step is None else f"at step {step}"
            self.stopped = f"{where}: {type(error).__name__}: {error}"
        log.warning("SeaCache stopped caching %s; the rest of this run is computed whole (outputs stay exact).",
                    self.stopped, exc_info=error)

    def branch_keys(self, transformer_options: dict, batch: int) -> list[str]:
        """One key per batch item: its conditioning entry, its index within it and, under context windows, the
        window (each window keeps its own gate state)."""
        cond_or_uncond = transformer_options.get("cond_or_uncond") or [0]
        uuids = transformer_options.get("uuids") or cond_or_uncond
        per_chunk = max(batch // len(cond_or_uncond), 1)
        window = getattr(transformer_options.get("context_window"), "index_list", None)
        window = None if window is None else self.windows.setdefault(tuple(window), f"w{len(self.windows)}")
        keys = []
        for kind, uuid in zip(cond_or_uncond, uuids):
            if uuid not in self.names:
                label = "cond" if kind == 0 else "uncond"
                self.names[uuid] = f"{label}{sum(n.startswith(label) for n in self.names.values())}"
            keys += [branch_key(self.names[uuid], i, window) for i in range(per_chunk)]
        return keys[:batch]

    def is_guidance_call(self, transformer_options: dict) -> bool:
        """Whether this call belongs to guidance rather than to the sampler's step: made inside a guidance
        function, or with other block/attention patches than the run's (e.g. skip-layer guidance)."""
        return transformer_options.get(GUIDANCE_OPTION, False) or options_signature(transformer_options) != self.patches_signature

    def follower_name(self, transformer_options: dict) -> str | None:
        """For a guidance call with other replacement patches than the run's (a skip-layer pass), the stable name
        of its patch set ("g0", "g1"... in order of appearance); None for a call that runs plain."""
        signature = options_signature(transformer_options)
        if signature == self.patches_signature:
            return None
        with self.lock:
            return self.guidance_signatures.setdefault(repr(signature), f"g{len(self.guidance_signatures)}")

    def start_follower(self, transformer_options: dict, x, t, name: str) -> GatedCall:
        """A guidance pass (patch set ``name``) following the step's main call on the same conditioning entries."""
        with self.lock:
            leaders = self.branch_keys(transformer_options, x.shape[0])
        sigma = float(t.flatten()[0])  # one host read per follower call
        return self.session.start_follower([f"{key}+{name}" for key in leaders], leaders, sigma)

    def start_call(self, transformer_options: dict, base_model, x, t, keys=None) -> GatedCall:
        """One call on the sampler's latent ``x`` at timestep ``t`` (mapped to the flow convention the SEA filter
        assumes), decided. ``keys`` name the branch of each item (default: from the call's conditioning entries).
        An audio-video latent's sound stream goes to the gate with its video, both scaled alike."""
        x, sound = av_streams(base_model, x)
        sigma = t.flatten()[:1]
        if sigma.device.type not in ("cuda", "cpu"):  # float64 not everywhere (MPS): two reads, sigma read here
            sigma = float(sigma)
            scale, filter_sigma = flow_scale_and_sigma(base_model.model_sampling, sigma)
            flow = lambda v: v if scale == 1.0 else v * scale  # noqa: E731
        else:  # the gate reads sigma and distances in one transfer
            scale, filter_sigma = flow_scale_and_sigma_on_device(base_model.model_sampling, sigma)
            flow = lambda v: scaled(v, scale)  # noqa: E731
        with self.lock:
            if self.session.schedule.sigmas is None and transformer_options.get("sample_sigmas") is not None:
                self.session.set_schedule(transformer_options["sample_sigmas"])
            keys = keys if keys is not None else self.branch_keys(transformer_options, x.shape[0])
        return self.session.start_call(flow(x), sigma, keys, filter_sigma, None if sound is None else flow(sound))

    def start_call_or_stop(self, transformer_options: dict, base_model, x, t, keys=None) -> GatedCall | None:
        """:meth:`start_call`, or None when the call must run whole, uncached (counted): SeaCache stopped caching
        in this run, or its gate raises now (caching stops). A sequence-parallel run's ranks still agree on it."""
        call = None
        if self.stopped is not None:
            agreed_reuse(False, x.device)  # the other ranks of a sequence-parallel run agree on this call too
        else:
            try:
                call = self.start_call(transformer_options, base_model, x, t, keys)
            except Exception as exc:  # noqa: BLE001 - SeaCache's gate failed: this call and the rest run whole
                self.stop_caching(exc)
        if call is None:
            with self.lock:
                self.uncached_calls += 1
        return call

    def start_follower_or_plain(self, transformer_options: dict, x, t) -> GatedCall | None:
        """For a guidance call with other replacement patches than the run's, the follower call of
        :meth:`start_follower`; None when the call runs plain: its patches are the run's, SeaCache stopped caching
        in this run, or the follow decision raises now (caching stops). No collective across ranks: every rank
        makes the same guidance calls and follows the decisions its ranks already agreed on."""
        if self.stopped is not None:
            return None
        try:
            name = self.follower_name(transformer_options)
            return None if name is None else self.start_follower(transformer_options, x, t, name)
        except Exception as exc:  # noqa: BLE001 - SeaCache's gate failed: this call and the rest run whole
            self.stop_caching(exc)
            return None

    def count_guidance_call(self, stack_call: StackCall | None = None) -> None:
        """Count one guidance call: plain (no ``stack_call``) or followed through the seam (reused or computed)."""
        with self.lock:
            self.guidance_calls += 1
            if stack_call is not None and stack_call.call.done and not all(
                    plan.frozen for plan in stack_call.call.decision.branches):  # passed the seam, had a leader
                self.guidance_followed += 1
                self.guidance_reused += bool(stack_call.reusing)

    def end_call(self, call: GatedCall, failure: Exception | None = None) -> None:
        """Count a call that missed the seam; stop caching when SeaCache's code raised inside the model during the
        call (``failure``); tell the canvas node how many calls were reused so far."""
        if failure is not None:
            self.stop_caching(failure, call.decision.step)
        if not call.finish():
            with self.lock:
                self.uncached_calls += 1
        stats = self.session.stats
        if self.settings.node_id is not None and stats.calls:
            notify_frontend({"node": self.settings.node_id, "reused": stats.reused, "calls": stats.calls,
                             "step": stats.records[-1].step, "steps": self.session.steps})

    def history_bytes(self, base_model, input_shape) -> int:
        """Device bytes of the residual history at its fullest for a model batch of ``input_shape`` (one branch
        per item, and one follower per item when the run has guidance functions), in the stack's compute dtype."""
        dtype = base_model.manual_cast_dtype or base_model.get_dtype()
        numel = self.seam.residual_numel(base_model.diffusion_model, tuple(input_shape))
        branches = input_shape[0] * (2 if self.guided else 1)
        return branches * self.session.gate.config.history_bytes(numel, comfy.model_management.dtype_size(dtype))

    def report(self, status: str) -> dict:
        """The session's report plus the seam and the calls that ran uncached."""
        return {**self.session.report(status), "seam": self.seam.name, "uncached_calls": self.uncached_calls,
                "guidance_calls": self.guidance_calls, "guidance_followed": self.guidance_followed,
                "guidance_reused": self.guidance_reused, "stopped": self.stopped}


def log_run(model_name: str, report: dict) -> None:
    """One INFO line per run (model, seam, calls, ran, reused, speedup) and one warning when calls missed the
    seam and ran whole, uncached (otherwise only the Stats node would show a run that gained nothing)."""
    log.info("SeaCache: %s run of %s, seam %s: %d calls, %d ran, %d reused, estimated stack speedup %.2fx",
             report["status"], model_name, report["seam"], report["calls"], report["ran"], report["reused"],
             report["speedup"])
    if report["uncached_calls"] and report["stopped"] is None:  # a stop has logged its own warning
        log.warning("SeaCache: %d of %d model calls of %s ran whole, uncached: they did not pass the seam (%s). "
                    "A node that changes the model's forward can cause this; SeaCache Stats shows the run.",
                    report["uncached_calls"], report["calls"] + report["uncached_calls"], model_name, report["seam"])


def gate_model_call(executor, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
    """``APPLY_MODEL`` wrapper: decide on the sampler's latent and run the model with the call handed to the seam.
    Guidance calls with other replacement patches follow the step's main call; other guidance calls run plain. A
    window's call inside a step gated as a whole (moving context windows) enters the seam through the step's view
    of it."""
    run: SeaCacheRun | None = transformer_options.get(RUN_OPTION)
    if run is None:
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
    base_model = executor.class_obj
    step = transformer_options.get(CALL_OPTION)
    if step is not None:  # a window's call inside a step gated as a whole (moving context windows)
        view = step.view(transformer_options, x)
        options = {**transformer_options, CALL_OPTION: view} if view is not None else {
            k: v for k, v in transformer_options.items() if k != CALL_OPTION}
        with run.seam.bind(base_model, view) if view is not None else nullcontext():
            return executor(x, t, c_concat, c_crossattn, control, options, **kwargs)
    if run.is_guidance_call(transformer_options):
        call = run.start_follower_or_plain(transformer_options, x, t)
        if call is None:
            run.count_guidance_call()
            return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
        out, stack_call = through_seam(run, call, executor, x, t, c_concat, c_crossattn, control, transformer_options,
                                       **kwargs)
        if stack_call.failure is not None:
            run.stop_caching(stack_call.failure, call.decision.step)
        call.finish()  # a follower that missed the seam (its patches skip the stack's first or last block) ran plain
        run.count_guidance_call(stack_call)
        return out
    call = run.start_call_or_stop(transformer_options, base_model, x, t)
    if call is None:
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
    out, stack_call = through_seam(run, call, executor, x, t, c_concat, c_crossattn, control, transformer_options,
                                   **kwargs)
    run.end_call(call, stack_call.failure)
    return out


def through_seam(run: SeaCacheRun, call: GatedCall, executor, x, t, c_concat, c_crossattn, control,
                 transformer_options: dict, **kwargs):
    """Run the model with ``call`` handed to the seam; the output and the seam's :class:`StackCall`."""
    stack_call = StackCall(call, x.shape[0], latent_channels(executor.class_obj, x))
    options = {**transformer_options, CALL_OPTION: stack_call}
    with run.seam.bind(executor.class_obj, stack_call):
        return executor(x, t, c_concat, c_crossattn, control, options, **kwargs), stack_call


def outer_sample_wrapper(executor, *args, **kwargs):
    """Run start: refuse what cannot be honoured, choose the seam for the final MODEL, create the run; publish its
    report and free its state however the run ends."""
    guider = executor.class_obj
    settings: SeaCacheSettings = guider.model_options["transformer_options"][SETTINGS_OPTION]
    refuse_other_caches(guider.model_patcher, guider.model_options)
    seam = select_seam(guider.model_patcher, guider.model_options)
    refuse_bad_run_inputs(args, kwargs)
    sigmas = args[3] if len(args) > 3 else kwargs["sigmas"]
    model_sampling = guider.model_patcher.get_model_object("model_sampling")
    for sigma in sigmas.flatten().tolist():  # the gate maps each call's sigma on the device, unchecked
        flow_scale_and_sigma(model_sampling, sigma)
    session = SeaCacheSession(settings.config, *settings.step_window(model_sampling, sigmas),
                              flow_sigma=lambda sigma: flow_scale_and_sigma(model_sampling, sigma)[1])
    run = SeaCacheRun(session, seam, settings)
    status = "failed"
    try:
        with run_scoped_option(guider, RUN_OPTION, run):
            seam.enter_run(guider.model_options)
            run.patches_signature = options_signature(guider.model_options["transformer_options"])
            run.guided = mark_guidance_calls(guider.model_options)
            out = executor(*args, **kwargs)
        status = "completed"
        return out
    finally:
        settings.publish(run.report(status))
        session.release()
        log_run(type(guider.model_patcher.model).__name__, settings.last_run)


def count_history_in_memory_estimate(executor, model, *args, **kwargs):
    """``PREPARE_SAMPLING`` wrapper: while ComfyUI estimates the memory a run needs and frees it, the model's
    estimate includes the run's residual history (every seam, every ComfyUI version: the estimate is taken from
    ``memory_required``, which is shadowed on the model instance for this call only, one thread at a time, and
    restored however it ends). The shadow shows the model's own signature (``functools.wraps``): newer ComfyUI
    passes keywords such as ``memory_efficient_attention`` only to estimators whose signature takes them."""
    options = kwargs.get("model_options") or {}
    run: SeaCacheRun | None = options.get("transformer_options", {}).get(RUN_OPTION)
    base = model.model
    if run is None:
        return executor(model, *args, **kwargs)
    with ESTIMATE_LOCK:  # two threads preparing runs of one model would see (and delete) each other's shadow
        if "memory_required" in vars(base):
            return executor(model, *args, **kwargs)
        estimate = base.memory_required

        @functools.wraps(estimate)
        def memory_required(input_shape, *a, **kw):
            return estimate(input_shape, *a, **kw) + run.history_bytes(base, input_shape)

        base.memory_required = memory_required
        try:
            return executor(model, *args, **kwargs)
        finally:
            del base.memory_required
