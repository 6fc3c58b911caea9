"""Spectrum (arXiv 2603.01623) on this pack's Cosmos3 for the peer benchmark: a benchmark-only wrapper on the
model's generator-stack hook (``GEN_STACK_WRAPPER``) that runs Spectrum's schedule and forecasts the stack's output
on the calls it skips. No Spectrum ComfyUI pack supports Cosmos3 (``spectrum_packs``), so this is the faithful
stand-in; docs/peers.md maps it point by point onto the paper and docs/spectrum.md (the official code).

What it does, per sampling run (a run starts when a call's step index is not past the last one seen):

- step index: the call's sigma located in ``transformer_options["sample_sigmas"]`` (one model call per step with
  euler, as Spectrum's per-branch call counter counts);
- schedule: ``spectrum_forecast.spectrum_schedule`` (warm-up 5 computed calls, window N = 2, growth alpha, the
  speed knob), fixed before the run from the step count alone;
- computed call: the stack runs and its output (the generator hidden states before ``norm_moe_gen``, the tensor
  Spectrum forecasts: the last block's output before the output norm and projection) is recorded at its step;
- skipped call: the stack does not run (neither generator layers nor text pathway); its output is
  ``SpectrumHistory(order=1, degree=4, ridge_lambda=0.1, blend=w, step_span=50, centre="none")``'s forecast over every computed
  call of the run (its capacity is the run's step count, so none falls out), and the model's head
  (``norm_moe_gen``, ``proj_out``, unpatchify) runs on it as on a computed output.

The prompt and the empty prompt run in one batched call (ComfyUI's CFGGuider); the forecast is a weighted sum with
weights from the step indices alone, and both branches follow the same schedule, so forecasting the batched tensor
equals Spectrum's two per-branch forecasters (where ComfyUI splits the batch, each part keeps its own run). ComfyUI
is imported only when a function runs.
"""

from __future__ import annotations

import math

from .spectrum_forecast import (
    SPECTRUM_DEGREE,
    SPECTRUM_RIDGE_LAMBDA,
    SPECTRUM_STEP_SPAN,
    SPECTRUM_WARMUP,
    SPECTRUM_WINDOW,
    SpectrumHistory,
    spectrum_schedule,
)

WRAPPER_KEY = "bench_peers_spectrum_stack"
LOCAL_ORDER = 1  # Spectrum's local predictor: linear through the last two computed outputs (taylor_order 1)
ALPHA_STEP = 0.05  # resolution of the alphas a plan picks from
ALPHA_MAX = 8.0


class SpectrumStack:
    """The ``GEN_STACK_WRAPPER`` wrapper of one Spectrum setting (blend ``w``, growth ``alpha``). It keeps one
    sampling run's schedule and history per batch composition (``transformer_options["cond_or_uncond"]``: the
    batched prompt and empty prompt as one, or each branch apart where ComfyUI splits them, as Spectrum keeps one
    forecaster per branch), started afresh when a call's step is not past that composition's last one."""

    def __init__(self, blend: float, alpha: float, warmup: int = SPECTRUM_WARMUP, window: float = SPECTRUM_WINDOW):
        self.blend, self.alpha, self.warmup, self.window = float(blend), float(alpha), warmup, window
        self.runs: dict[tuple, dict] = {}

    def _run_for(self, key: tuple, step: int, steps: int) -> dict:
        run = self.runs.get(key)
        if run is None or step <= run["last_step"]:
            run = self.runs[key] = dict(
                schedule=spectrum_schedule(steps, self.warmup, self.window, self.alpha),
                history=SpectrumHistory(LOCAL_ORDER, degree=SPECTRUM_DEGREE, ridge_lambda=SPECTRUM_RIDGE_LAMBDA,
                                        blend=self.blend, capacity=max(steps, SPECTRUM_DEGREE + 1),
                                        step_span=SPECTRUM_STEP_SPAN, centre="none"))
        run["last_step"] = step
        return run

    def __call__(self, executor, hidden, inputs):
        options = inputs.transformer_options
        sample_sigmas = options["sample_sigmas"][:-1].float().cpu()
        step = int((sample_sigmas - options["sigmas"][0].float().cpu()).abs().argmin())
        run = self._run_for(tuple(options.get("cond_or_uncond", ())), step, len(sample_sigmas))
        history = run["history"]
        if run["schedule"][step] or not len(history):
            out = executor(hidden, inputs)
            history.append(step, out.clone())  # the head must not be able to change a record in place
            return out
        return history.predict(step, hidden.device, hidden.dtype)


def spectrum_stack(blend: float):
    """The apply function ``(ns, model, alpha) -> MODEL`` of Spectrum at blend ``w`` = ``blend``: a clone of a
    Cosmos3 MODEL with a :class:`SpectrumStack` on its generator-stack hook (keyed, so a second apply replaces it)."""
    def apply(ns, model, alpha):
        from seacache_testing.comfyui_harness import import_pack_module

        if not hasattr(model.model.diffusion_model, "call_gen_stack"):
            raise ValueError("the Spectrum stack wrapper needs this pack's Cosmos3 (its generator-stack hook)")
        hook = import_pack_module("nodes.cosmos3.transformer").GEN_STACK_WRAPPER
        patched = model.clone()
        patched.add_wrapper_with_key(hook, WRAPPER_KEY, SpectrumStack(blend, alpha))
        return patched
    return apply


def computed_calls(steps: int, alpha: float) -> int:
    """Calls Spectrum computes of ``steps`` at growth ``alpha`` (published warm-up and window)."""
    return sum(spectrum_schedule(steps, SPECTRUM_WARMUP, SPECTRUM_WINDOW, alpha))


def planned_alphas(steps: int, targets) -> tuple[float, ...]:
    """Growth values whose computed calls bracket each target (calls of ``steps``): per target the smallest alpha
    (on a 0.05 grid up to 8) computing ceil(target) calls and the smallest computing floor(target), or where the
    schedule skips a count, the nearest counts on either side; the fewest it reaches where a target lies below
    them. Spectrum's calls depend on the step count alone, so no run is needed to choose them."""
    first_alpha: dict[int, float] = {}
    for i in range(int(ALPHA_MAX / ALPHA_STEP) + 1):
        alpha = round(i * ALPHA_STEP, 4)
        first_alpha.setdefault(computed_calls(steps, alpha), alpha)
    counts = sorted(first_alpha)
    chosen = []
    for target in targets:
        above = [c for c in counts if c >= math.ceil(target)]
        below = [c for c in counts if c <= math.floor(target)]
        for count in ((min(above),) if above else ()) + ((max(below),) if below else (min(counts),)):
            chosen.append(first_alpha[count])
    return tuple(sorted(set(chosen)))
