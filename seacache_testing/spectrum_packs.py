"""Spectrum's ComfyUI packs as peer caches of the peer benchmark, beside ``peer_packs``' TeaCache and MagCache:
which nodes they register, which models they run on, the knob that sets their speed, and how to apply one so that
only the MODEL it returns runs it.

Spectrum (arXiv 2603.01623) forecasts the last block's output on skipped steps with a Chebyshev ridge regression
over every computed step, blended with a local linear extrapolation, on a content-blind schedule: after
``warmup_steps`` computed steps it computes every ``floor(ws)``-th step, ``ws`` starting at ``window_size`` (N) and
growing by ``flex_window`` (alpha) after each computed step. Both packs take that schedule and the forecaster's
degree (M = 4), ridge lambda (0.1) and blend weight ``w``; their code is never part of this repository. The
facts below were read and measured at xmarre 42de04b1 (version 0.1.14, 2026-04-08) and judian17 fb1ca586
(2026-04-30), on ComfyUI 0.3.64 and 0.33.0.

- ``SpectrumApplyWAN`` (xmarre/ComfyUI-Spectrum-WAN-Proper): core Wan 2.1 / 2.2 only. It replaces the Wan
  model's ``forward_orig`` with its own copy of it that skips the block loop on forecast steps (the head and
  unpatchify run on the forecast). Inputs: backend, transition_mode, enabled, blend_weight (w, default 1),
  degree, ridge_lambda, window_size (2), flex_window (0.75), warmup_steps (5), history_size (16), debug,
  forecaster_cache_mode. It also puts its runtime on the BaseModel that every clone of the MODEL shares
  (``_spectrum_wan_runtime``) and injects it into every later ``apply_model`` call, so after applying it the input
  MODEL and every other clone run Spectrum too (the most recently applied settings): measured, an uncached run of
  the input MODEL took 9 of 20 calls with the node's result. :func:`apply` clears that attribute after the node
  runs; the returned MODEL still carries its runtime in its own ``transformer_options`` and samples as before.
  On a Flux or HunyuanVideo model the replaced ``forward_orig`` raises a TypeError ("got multiple values for
  argument 'transformer_options'") on every later call of that model, clones included; on Qwen-Image and this
  pack's Cosmos3 it finds no Wan stack and leaves sampling unchanged.
- ``Spectrum`` (judian17/ComfyUI-Spectrum, V3 node): Flux-like (double + single blocks), MMDiT (Qwen-Image, SD3),
  HunyuanVideo 1.5 (double blocks only), Wan (``blocks`` + ``head``), Z-Image / Lumina2 and Ernie. It replaces every
  block through ``patches_replace["dit"]`` on a clone: on a forecast step the first block returns the forecast and
  the others pass it through. Inputs: w (0.5), M (4), lam (0.1), warmup_steps (3), window_size (2), flex_window
  (0.75, the node allows at most 4), max_w (0.8), verbose. Its ``w`` is overwritten before every forecast by a
  weight that grows with the current window (at most ``max_w``), so the ``w`` input does not reach the forecast.
  This pack's Cosmos3 (``layers``) is not detected: the node prints "Unsupported model" and samples uncached. Its
  Flux-like path (Flux, HunyuanVideo 1.0) cuts the image tokens out of the last block's output with
  ``transformer_options["img_slice"]``, which ComfyUI 0.33.0 sets and 0.3.64 does not: there the forecast holds
  the text tokens too and the first forecast step raises ("The expanded size of the tensor (64) must match the
  existing size (70)"). Wan and Qwen-Image run on both.

The speed knob of both is ``flex_window`` (alpha) at N = 2: on a tiny random Wan 2.1 T2V, 35 steps, euler, CFG 4,
xmarre's node computes 20 / 15 / 13 / 12 / 11 / 10 / 9 / 8 of 35 calls at alpha 0 / 0.25 / 0.5 / 0.75 / 1 / 2 / 3 /
4, judian17's 19 / 14 / 11 / 10 / 9 / 8 / 7 / 7 (its warm-up is 3 steps, xmarre's 5). Above 20 of 35 calls
needs N below 2 (N = 1 with alpha 0 never skips), so a grid in alpha starts near 20. The grid stays positive for
the benchmark's log interpolation. Torch and ComfyUI are imported only when a function runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from seacache_testing import peer_packs
from seacache_testing.peer_packs import PeerCache

FLEX_GRID = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)


@dataclass(frozen=True)
class SpectrumPeer(PeerCache):
    """A Spectrum node as a peer cache: ``grid`` holds knob values that all skip (none is "uncached", unlike
    ``PeerCache``'s first value); ``never_skips``: fixed inputs at which the node, with the knob at 0, computes
    every step (for the tests); ``shared_model_attribute``: an attribute the node sets on the BaseModel every
    clone shares, cleared after applying (see the module docstring)."""

    never_skips: tuple[tuple[str, object], ...] = ()
    shared_model_attribute: str = ""

    def never_skipping(self) -> "SpectrumPeer":
        """This peer with ``never_skips`` in its fixed inputs: apply it at knob value 0 to compute every step."""
        return dataclasses.replace(self, fixed=(*self.fixed, *self.never_skips))


def _xmarre(blend_weight: float) -> dict:
    return dict(knob="flex_window", grid=FLEX_GRID + (6.0, 8.0),
                fixed=(("backend", "wan21"), ("transition_mode", "separate_fit"), ("enabled", True),
                       ("blend_weight", blend_weight), ("degree", 4), ("ridge_lambda", 0.1), ("window_size", 2.0),
                       ("warmup_steps", 5), ("history_size", 16), ("debug", False),
                       ("forecaster_cache_mode", "legacy_dense_coeff")),
                supported_configs=("WAN21_T2V", "WAN21_I2V"), source="xmarre/ComfyUI-Spectrum-WAN-Proper",
                never_skips=(("window_size", 1.0),),
                shared_model_attribute="_spectrum_wan_runtime")


SPECTRUM_PEERS = (
    SpectrumPeer("Spectrum WAN", "SpectrumApplyWAN", **_xmarre(1.0)),
    SpectrumPeer("Spectrum WAN w 0.5", "SpectrumApplyWAN", **_xmarre(0.5)),
    SpectrumPeer("Spectrum", "Spectrum", "flex_window", FLEX_GRID,
                 (("w", 0.5), ("M", 4), ("lam", 0.1), ("warmup_steps", 3), ("window_size", 2.0), ("max_w", 0.8),
                  ("verbose", False)),
                 ("WAN21_T2V", "WAN21_I2V", "Flux", "QwenImage", "HunyuanVideo"), "judian17/ComfyUI-Spectrum",
                 never_skips=(("window_size", 1.0),)),
)


def installed(ns) -> list[SpectrumPeer]:
    """The Spectrum peers whose node id is registered in this ComfyUI session (``peer_packs.load_peer_packs``
    loads their folders with the others')."""
    return [peer for peer in SPECTRUM_PEERS if peer.node_id in ns.nodes.NODE_CLASS_MAPPINGS]


def installed_peers(ns) -> list[PeerCache]:
    """Every installed third-party cache the peer benchmark knows: ``peer_packs``' and the Spectrum packs'."""
    return [*peer_packs.installed(ns), *installed(ns)]


def apply(ns, peer: PeerCache, model, knob_value: float):
    """The MODEL ``peer``'s node returns for ``model`` at ``knob_value`` (``peer_packs.apply``: unsupported models
    raise before the node runs); for a peer with a ``shared_model_attribute`` that attribute is then cleared from
    the shared BaseModel, so the input MODEL and its other clones sample without the node."""
    patched = peer_packs.apply(ns, peer, model, knob_value)
    attribute = getattr(peer, "shared_model_attribute", "")
    if attribute and getattr(patched.model, attribute, None) is not None:
        setattr(patched.model, attribute, None)
    return patched
