"""One trained proxy at one shift and the ways a quality benchmark runs it (``bench_quality``, ``bench_sound``):
uncached, through a SeaCache gate (the shipped ``seacache_core.SeaCacheRun`` with ``seacache_host``), with a
fixed set of evenly spaced steps, and, for the audio-video proxy, with ComfyUI EasyCache's rule re-implemented on
the whole model call. Euler flow sampler (``quality_proxy.sample``), cond and uncond batched in one call.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cosmos3 import reference_sigmas
from seacache_core import ResidualHistory, SeaCacheConfig, SeaCacheRun, item_distances
from seacache_core.sea_filter import Indicator
from seacache_testing import quality_proxy as proxy
from seacache_testing.seacache_host import SeaCachedCosmos3


class UnfilteredIndicator(Indicator):
    """Benchmark-only gate indicator: the raw noisy latent, no SEA filter (what the filter is compared with); it
    stores the latent as the same-sigma gate does and compares it unfiltered."""

    def __init__(self):
        super().__init__("sea_same_sigma")

    def distances(self, current: torch.Tensor, previous: torch.Tensor, at: tuple, shapes=None) -> torch.Tensor:
        return item_distances(current, previous)


class EvenSkipHost:
    """Baseline: computes the stack on a fixed set of steps and extrapolates the residual on the others with
    the same history/extrapolation as SeaCache (no gate)."""

    def __init__(self, model, sigmas: torch.Tensor, compute_steps: set[int], order: int):
        self.model, self.schedule = model, [float(s) for s in sigmas[:-1]]
        self.compute_steps, self.history, self.full = compute_steps, ResidualHistory(order), 0

    def __call__(self, hidden, inputs):
        step = min(range(len(self.schedule)), key=lambda i: abs(self.schedule[i] - float(inputs.sigma[0])))
        if step in self.compute_steps or not len(self.history):
            out = self.model.run_gen_stack(hidden, inputs)
            self.history.append(step, out - hidden)
            self.full += 1
            return out
        return hidden + self.history.predict(step, hidden.device, hidden.dtype)


def even_steps(steps: int, full: int) -> set[int]:
    """``full`` step indices spread evenly over ``0..steps-1``, first and last included."""
    full = max(2, min(full, steps))
    return {round(i * (steps - 1) / (full - 1)) for i in range(full)}


def gate_session(gate: str, threshold: float, order: int, sigmas: torch.Tensor, speedup: float = 0.0) -> SeaCacheRun:
    """A run of ``gate`` ("sea", "sea_same_sigma" or the benchmark's "unfiltered") on this schedule; a ``speedup``
    target replaces the threshold (the speed controller)."""
    config = SeaCacheConfig(threshold=threshold, order=order, gate="sea" if gate == "unfiltered" else gate, speedup=speedup)
    session = SeaCacheRun(config, sigmas)
    if gate == "unfiltered":
        session.indicator = UnfilteredIndicator()
    return session


@dataclass
class Job:
    """One proxy at one shift: the model, its data source and the sampling settings."""

    model: torch.nn.Module
    data: proxy.ProxyData
    shift: float
    steps: int
    frames: int | None = None

    def pair(self, p: int) -> tuple[int, int]:
        """(class label, noise seed) of prompt/seed pair ``p``."""
        return p % self.data.classes, 70_000 + p

    def sample(self, p: int, stack=None) -> torch.Tensor:
        label, seed = self.pair(p)
        return proxy.sample(self.model, label, seed, steps=self.steps, shift=self.shift, stack=stack,
                            data=self.data, frames=self.frames)

    def run(self, p: int, gate: str, order: int, setting: float, speedup: float = 0.0) -> tuple[int, torch.Tensor]:
        """(full calls, final latent) of one variant; ``setting`` is the threshold, or the count for "even";
        ``speedup`` > 0 runs the gate at that target instead of the threshold."""
        sigmas = reference_sigmas(self.steps, self.shift)
        if gate == "even":
            host = EvenSkipHost(self.model, sigmas, even_steps(self.steps, int(setting)), order)
            x = self.sample(p, host)
            return host.full, x
        session = gate_session(gate, setting, order, sigmas, speedup)
        x = self.sample(p, SeaCachedCosmos3(self.model, session))
        full = session.stats.ran
        session.release()
        return full, x


EASYCACHE_WINDOW = (0.15, 0.95)  # ComfyUI EasyCache's default start_percent / end_percent
EASYCACHE_SUBSAMPLE = 8  # its default subsample_factor


class EasyCacheModel:
    """ComfyUI core EasyCache's rule around a whole audio-video model call (a callable with the transformer's
    signature), re-implemented here rather than driven through ComfyUI (the proxy's decoded sound lives outside it):
    the cumulative predicted output change, read from the video only (its first, cond item, subsampled
    ``EASYCACHE_SUBSAMPLE`` x in space), against the threshold inside EasyCache's default window
    (``EASYCACHE_WINDOW`` of the schedule); a skipped call returns its input plus the last computed
    output-minus-input of each stream (order-0 reuse, sound included). ``full`` counts the calls that ran the
    model."""

    def __init__(self, model, shift: float, threshold: float):
        self.model, self.threshold, self.full = model, threshold, 0
        shifted = lambda t: shift * t / (1 + (shift - 1) * t)  # noqa: E731  (ComfyUI's percent_to_sigma, flow)
        self.start_sigma, self.end_sigma = shifted(1 - EASYCACHE_WINDOW[0]), shifted(1 - EASYCACHE_WINDOW[1])
        self.rate = self.x_prev = self.out_prev = self.out_norm = self.diffs = None
        self.cumulative = 0.0

    def _sub(self, x: torch.Tensor) -> torch.Tensor:
        return x[:1, ..., ::EASYCACHE_SUBSAMPLE, ::EASYCACHE_SUBSAMPLE]  # the first (cond) item, subsampled

    def __call__(self, x, timestep, *args, sound=None, **kwargs):
        sigma = float(timestep[0])
        if sigma <= self.end_sigma:  # past its window: computed, state untouched
            self.full += 1
            return self.model(x, timestep, *args, sound=sound, **kwargs)
        change = None
        if sigma <= self.start_sigma:
            if self.x_prev is not None:
                change = float((self._sub(x) - self.x_prev).abs().mean())
            if self.out_norm is not None and self.rate is not None:
                self.cumulative += self.rate * change / self.out_norm
                if self.cumulative < self.threshold and self.diffs is not None:
                    return x + self.diffs[0], sound + self.diffs[1]
                self.cumulative = 0.0
        out, out_sound = self.model(x, timestep, *args, sound=sound, **kwargs)
        self.full += 1
        if self.out_norm is not None and change is not None:
            self.rate = float((self._sub(out) - self.out_prev).abs().mean()) / change
        self.diffs = (out - x, out_sound - sound)
        self.x_prev, self.out_prev, self.out_norm = self._sub(x), self._sub(out), float(out.abs().mean())
        return out, out_sound


class SoundJob(Job):
    """The audio-video proxy at one shift: ``sample`` and ``run`` give (video, sound) pairs."""

    sound_weight: float = 1.0
    gate: str = "sea_same_sigma"

    def sample(self, p: int, stack=None, model=None):
        label, seed = self.pair(p)
        return proxy.sample_av(self.model if model is None else model, label, seed, steps=self.steps, shift=self.shift, stack=stack,
                               data=self.data)

    def run(self, p: int, gate: str, order: int, setting: float):
        """(full calls, (video, sound)) of one variant; ``setting`` is the threshold, or the count for "even"."""
        if gate == "even":
            return super().run(p, gate, order, setting)
        if gate == "easycache":
            wrapped = EasyCacheModel(self.model, self.shift, setting)
            out = self.sample(p, model=wrapped)
            return wrapped.full, out
        weight = 0.0 if gate == "video" else self.sound_weight
        session = SeaCacheRun(SeaCacheConfig(threshold=setting, order=order, gate=self.gate, sound_weight=weight),
                              reference_sigmas(self.steps, self.shift))
        out = self.sample(p, SeaCachedCosmos3(self.model, session))
        full = session.stats.ran
        session.release()
        return full, out
