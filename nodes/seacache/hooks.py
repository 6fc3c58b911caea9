"""SeaCache inside ComfyUI's sampler: the run-start wrapper (``OUTER_SAMPLE``) and the per-call wrapper
(``APPLY_MODEL``), one protocol for every model. A seam (:mod:`.seams`) only says where the skippable stack begins
and ends; the run (``seacache_core.SeaCacheRun``) decides, predicts and commits.

Per sampling run, :func:`outer_sample_wrapper` (run start, when every patch of the final MODEL is known) refuses what
cannot be honoured, chooses the seam for the final MODEL, lets it place its run-time hooks in the run's private
model options and creates the run's :class:`SamplingRun`, whose report goes to the Stats node and whose state is
freed however the run ends. Per model call, :func:`gate_model_call` maps the sampler's latent to the gate's flow
convention, asks the run for the call's verdict and hands the call to the seam under ``CALL_OPTION``. One INFO line
per run, and one warning when calls ran whole because they missed the seam.

Failure behaviour, the same for every seam:

- Bad settings, a MODEL that is no diffusion model, another step cache on the MODEL, run inputs SeaCache cannot
  serve, or a first-block gate on a run that cannot hand over the first block's input (:mod:`.run_inputs`):
  ValueError at Apply or at run start, before the first step, naming the problem and the fix; the input MODEL is
  unchanged.
- A call that never passes the seam (a code path the seam does not know, an output that does not match the
  latent): it ran whole, so its output is exact; the run forgets it and the report counts it in ``uncached_calls``.
- Guidance calls with other replacement patches than the sampler's (skip-layer guidance, perturbed attention) follow
  the step's main call: each item has its own branch (its conditioning's key plus the patch set's name,
  "cond0/0+g0") and history, and reuses exactly when its conditioning's branch reused at this step. Other calls made
  by a guidance function run whole and leave the run untouched. All are counted in ``guidance_calls``.
- An error raised by the model itself propagates; the report says "failed" ("interrupted" for ComfyUI's interrupt,
  the user's cancel); the run's state is freed.
- An error raised by SeaCache's own code during sampling (at a call, or in a seam's step inside the model): that
  call runs whole, and so do all later calls of the run; the report's ``stopped`` says why; one warning.
"""

from __future__ import annotations

import logging
import math
import sys
from contextlib import nullcontext

import comfy.model_management
import torch

from ...seacache_core import Call, SeaCacheRun
from ...seacache_core.run import agreed_reuse
from ..run_scope import run_scoped_option
from .composition import GUIDANCE_OPTION, mark_guidance_calls, options_signature, refuse_other_caches
from .run_inputs import refuse_bad_run_inputs, refuse_unreachable_first_block
from .seams import select_seam
from .seams.base import CALL_OPTION, RUN_OPTION, WINDOWED_STEP_OPTION, Seam
from .settings import SETTINGS_OPTION, SeaCacheSettings

log = logging.getLogger(__name__)

PROGRESS_EVENT = "seacache.progress"
HALF = (torch.float16, torch.bfloat16)


def flow_scale_and_sigma(model_sampling, sigma: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scale, sigma_flow)`` with ``scale * x = (1 - sigma_flow) x0 + sigma_flow eps`` for the sampler's latent x at
    the one-value ``sigma``, float64 where it lives, without a host read (docs/algorithm.md §2). ComfyUI keeps the
    latent in its sampling type's own form ``b x0 + a eps`` (flow matching: ``b = 1 - a``; epsilon/v-prediction:
    ``b = 1``), read off the model's own ``noise_scaling``, so ``scale = 1 / (a + b)``, ``sigma_flow = a / (a + b)``."""
    sigma = sigma.reshape(1).to(torch.float64)
    one, zero = torch.ones_like(sigma), torch.zeros_like(sigma)
    a = model_sampling.noise_scaling(sigma, one.clone(), zero.clone())
    b = model_sampling.noise_scaling(sigma, zero.clone(), one.clone())
    return 1.0 / (a + b), a / (a + b)


def schedule_in_flow(model_sampling, sigmas) -> list[float]:
    """The schedule's sigmas in the flow convention (host floats); ValueError for a sampling type that is no noise
    schedule of the form ``b x0 + a eps`` with ``a, b >= 0``: checked at Apply and for every sigma at run start, since
    each call maps its sigma on the device unchecked."""
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
    """``(latent, sound, sigma, filter_sigma)`` the gate reads of a model call on the sampler's latent ``x`` at
    timestep ``t``: the latent (and sound) in the flow convention the SEA filter assumes, scaled by
    :func:`flow_scale_and_sigma`'s ``scale`` (the product in float32 for half types, as ``x * float(scale)`` rounds),
    and sigma as a one-value tensor where it lives (read on the host with the distances), or a float where float64 is
    missing (MPS: read here, converted on the host).

    The streams: when ComfyUI packed a video and a sound latent into ``[B, 1, N]`` (their shapes in
    ``base_model.latent_shapes``), the video and, for Cosmos3's ``[B, C, T]``, the sound (read by the joint gate;
    LTX-2's ``[B, C, T, F]`` audio is not handed to the gate: the joint gate was not measured on it); else ``x``."""
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


class SamplingRun(SeaCacheRun):
    """One ComfyUI sampling run: the core run plus the seam chosen at run start, the replacement patches of the
    sampler's own calls, and stable branch names. ComfyUI gives each conditioning entry a fresh uuid per run; branches
    are named "cond0", "uncond0", "uncond1"... by the entry's kind (0: the positive, any other list: uncond) in order
    of appearance, then the item ("cond0/0") and, under static context windows, the window ("cond0/0@w1"), so identical
    runs report identically. Safe under concurrent calls (ComfyUI's multi-GPU CFG split): shared counts hold the
    run's lock."""

    def __init__(self, settings: SeaCacheSettings, seam: Seam, sigmas: torch.Tensor, model_sampling,
                 latent_channels: int):
        super().__init__(settings.config, sigmas, settings.reuse_steps(model_sampling, sigmas),
                         schedule_in_flow(model_sampling, sigmas))
        self.settings, self.seam = settings, seam
        self.latent_channels = latent_channels  # of the sampler's (video) latent: concat conditioning comes after
        self.patches_signature: dict = {}  # the replacement patches of the sampler's own calls (set at run start)
        self.guided = False  # the run has guidance functions (set at run start): the estimate counts followers
        self.names: dict = {}
        self.windows: dict = {}
        self.guidance_names: dict[str, str] = {}  # the patch set of each kind of follower -> its name "g0"...

    def is_guidance_call(self, transformer_options: dict) -> bool:
        """Whether a model call belongs to guidance rather than to the sampler's step: made inside a guidance
        function, or with other replacement patches than the run's (e.g. skip-layer guidance)."""
        return transformer_options.get(GUIDANCE_OPTION, False) or \
            options_signature(transformer_options) != self.patches_signature

    def stop_caching(self, error: Exception, step: int | None = None) -> None:
        """SeaCache's own code raised during sampling (in the call at ``step`` when known): every later call of this
        run computes whole. Logged once."""
        with self.lock:
            if self.stopped is not None:
                return
            self.stopped = f"{'during sampling' if step is None else f'at step {step}'}: {type(error).__name__}: {error}"
        log.warning("SeaCache stopped caching %s; the rest of this run is computed whole (outputs stay exact).",
                    self.stopped, exc_info=error)

    def branch_keys(self, transformer_options: dict, batch: int) -> list[str]:
        """One key per batch item: its conditioning entry (``cond_or_uncond`` its kind, ``uuids`` the entry), its
        index within it and, under static context windows, the window (each window keeps its own branch state)."""
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
                   keys: list | None = None) -> Call | None:
        """The call on the sampler's latent ``x`` at timestep ``t``, decided on the latent in the flow convention the
        SEA filter assumes (an audio-video latent's sound stream with it, scaled alike), or under a first-block gate
        pending until the seam enters the stack (decided there on the first block's input, filtered at the same flow
        sigma); ``keys`` name the branch of each item (default: from the call's conditioning entries). None when the
        call must run whole (counted): SeaCache stopped caching in this run, or the decision raises now (caching
        stops). A sequence-parallel run's ranks still agree on it."""
        call = None
        if self.stopped is not None:
            agreed_reuse(False, x.device)  # the other ranks of a sequence-parallel run agree on this call too
        else:
            try:
                latent, sound, sigma, filter_sigma = gate_input(base_model, x, t)
                if keys is None:
                    with self.lock:
                        keys = self.branch_keys(transformer_options, x.shape[0])
                if self.indicator.reads_first_block:  # decided where the seam enters the stack, on its first block
                    call = self.pending(sigma, keys, filter_sigma)
                else:
                    call = self.decide(latent, sigma, keys, filter_sigma, sound)
            except Exception as exc:  # noqa: BLE001 - SeaCache's decision failed: this call and the rest run whole
                self.stop_caching(exc)
        if call is None:
            with self.lock:
                self.uncached_calls += 1
        return call

    def start_follower(self, transformer_options: dict, x: torch.Tensor, t: torch.Tensor) -> Call | None:
        """For a guidance call with other replacement patches than the run's (a skip-layer pass), the call following
        the step's main call on the same conditioning entries (``SeaCacheRun.follow``); None when it runs plain: its
        patches are the run's, SeaCache stopped caching, or the decision raises now (caching stops). No collective
        across ranks: every rank makes the same guidance calls and follows decisions its ranks already agreed on."""
        if self.stopped is not None:
            return None
        try:
            signature = options_signature(transformer_options)
            if signature == self.patches_signature:
                return None
            with self.lock:
                name = self.guidance_names.setdefault(repr(signature), f"g{len(self.guidance_names)}")
                leaders = self.branch_keys(transformer_options, x.shape[0])
            return self.follow([f"{key}+{name}" for key in leaders], leaders, float(t.flatten()[0]))
        except Exception as exc:  # noqa: BLE001 - SeaCache's decision failed: this call and the rest run whole
            self.stop_caching(exc)
            return None

    def end_call(self, call: Call | None, guidance: bool = False) -> None:
        """After a model call: stop caching when SeaCache's code raised inside the model; count a guidance call
        (plain without ``call``; followed when it passed the seam and had a leader) or a main call that missed the
        seam; tell the canvas how many calls were reused so far."""
        if call is not None and call.failure is not None:
            self.stop_caching(call.failure, call.step)
        with self.lock:
            if guidance:
                self.guidance_calls += 1
                if call is not None and call.done and not all(plan.frozen for plan in call.branches):
                    self.guidance_followed += 1
                    self.guidance_reused += bool(call.reusing)
                return
            self.uncached_calls += not call.done  # it never passed the stack: it ran whole, its output is exact
        # the browser tab that queued the prompt, when ComfyUI's server runs
        server = getattr(getattr(sys.modules.get("server"), "PromptServer", None), "instance", None)
        if server is not None and self.settings.node_id is not None and self.stats.calls:
            server.send_sync(PROGRESS_EVENT, {"node": self.settings.node_id, "reused": self.stats.reused,
                                              "calls": self.stats.calls, "step": self.stats.records[-1].step,
                                              "steps": self.steps}, getattr(server, "client_id", None))

    def report(self, status: str) -> dict:
        """The core run's report plus the seam."""
        return {**super().report(status), "seam": self.seam.name}


def gate_model_call(executor, x, t, c_concat=None, c_crossattn=None, control=None, transformer_options={}, **kwargs):
    """``APPLY_MODEL`` wrapper: run the model with the call's verdict handed to the seam. Guidance calls with other
    replacement patches follow the step's main call; other guidance calls run plain. A window's call inside a step
    gated as a whole (moving context windows) enters the seam through the step's view of it."""
    run: SamplingRun | None = transformer_options.get(RUN_OPTION)
    if run is None:
        return executor(x, t, c_concat, c_crossattn, control, transformer_options, **kwargs)
    base_model = executor.class_obj
    windowed = transformer_options.get(WINDOWED_STEP_OPTION)
    guidance = windowed is None and run.is_guidance_call(transformer_options)
    if windowed is not None:
        call = windowed.view(transformer_options, x)
    elif guidance:
        call = run.start_follower(transformer_options, x, t)
    else:
        call = run.start_call(transformer_options, base_model, x, t)
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
    """One INFO line per run (its status: completed, failed or interrupted; model, seam, calls, ran, reused,
    speedup) and one warning when calls missed the seam and ran whole, uncached (otherwise only the Stats node would
    show a run that gained nothing)."""
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
    run = SamplingRun(settings, seam, sigmas, guider.model_patcher.get_model_object("model_sampling"), channels)
    status = "failed"
    try:
        with run_scoped_option(guider, RUN_OPTION, run):
            seam.enter_run(guider.model_options)
            run.patches_signature = options_signature(guider.model_options["transformer_options"])
            run.guided = mark_guidance_calls(guider.model_options)
            out = executor(*args, **kwargs)
        status = "completed"
        return out
    except comfy.model_management.InterruptProcessingException:
        status = "interrupted"  # the user's cancel, not a failure
        raise
    finally:
        settings.publish(run.report(status))
        run.release()
        log_run(type(guider.model_patcher.model).__name__, settings.last_run)
