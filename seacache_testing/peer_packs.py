"""Third-party cache node packs a ComfyUI user may have installed beside SeaCache, for the peer benchmark: which
are loaded, which models they support, and how to apply one at a knob value through ComfyUI's node execution.

Covered (node ids as the packs register them; their code is never part of this repository):
- TeaCache, welltop-cn/ComfyUI-TeaCache, node "TeaCache": ``rel_l1_thresh`` on the accumulated, polynomial-rescaled
  relative L1 change of the time embedding; Wan 2.1 T2V 1.3B coefficients.
- MagCache, Zehong-Ma/ComfyUI-MagCache (the upstream of forks such as wzgrx/ComfyUI-MagCache), node "MagCache":
  ``magcache_thresh`` on the accumulated error of precomputed residual-magnitude ratios of Wan 2.1 T2V 1.3B. Its
  decisions depend on the step index only, never on the model's activations, so on any model it is a fixed schedule.
- First-block cache, chengzeyi/Comfy-WaveSpeed, node "ApplyFBCacheOnModel": ``residual_diff_threshold``. It looks
  for ``transformer_blocks``, ``double_blocks`` or ``joint_blocks`` (or a UNet / Flux class); ComfyUI's WanModel
  keeps its blocks in ``blocks``, so on Wan it raises "No double blocks found for WanModel": it supports no model
  the peer benchmark samples (its Cosmos3 neither, whose blocks are ``layers``), and is listed so that the
  benchmark can say so. TeaCache and MagCache have no Cosmos3 settings either.

Newer ComfyUI: TeaCache and MagCache import ``comfy.ldm.lightricks.model.precompute_freqs_cis`` at load time for
their LTX-Video path; ComfyUI 0.33.0 no longer has it, so as published both fail to import there ("cannot import
name 'precompute_freqs_cis'"). ``load_peer_packs`` puts a stand-in at that name first (only where it is missing),
which raises if called: their Wan path never calls it, so on Wan they run their own code unchanged.

The packs' magic numbers (TeaCache's polynomial, MagCache's ratios) are calibrated on the real Wan 2.1 1.3B. On a
tiny trained proxy they no longer predict the output change, but each knob still trades full stack calls for
error, which is all a matched-speed comparison needs. The knob grids reach past 13 and 22 of 35 full calls on a
tiny random Wan 2.1 T2V (euler, CFG 4, 35 steps). TeaCache needs thresholds far above its node's maximum (10) there:
the tiny model's time embedding changes by 60-140 % (relative L1) a step, far outside the range the polynomial was fit
on, which maps it to 100-6000; on the trained Wan proxy 0.17-0.49 span 22 to 13 calls, so its grid spans 0.001 to
2000 (``run_node`` does not enforce the UI range). MagCache's
``magcache_K`` (most skips in a row) is 4 instead of its default 2, which stops at 16 of 35 (threshold 0.3).

Torch and ComfyUI are imported only when a function runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

PEER_CACHES_ENV = "PEER_CACHES_PATH"
"""A custom_nodes-like folder whose every sub-folder is loaded with ComfyUI's loader (default: ComfyUI's own)."""


@dataclass(frozen=True)
class PeerCache:
    """One third-party cache node: the input it sweeps (``knob``, over ``grid``, the first value uncached), its
    other inputs (``fixed``, as ``(name, value)`` pairs), and the ComfyUI model configs it supports (class names
    in ``comfy.supported_models``; empty when it supports none the peer benchmark samples, ``note`` says why)."""

    name: str
    node_id: str
    knob: str
    grid: tuple[float, ...]
    fixed: tuple[tuple[str, object], ...]
    supported_configs: tuple[str, ...]
    source: str
    note: str = ""

    def inputs(self, knob_value: float) -> dict:
        """The node's inputs besides ``model`` at one knob value."""
        return {**dict(self.fixed), self.knob: knob_value}


PEER_CACHES = (
    PeerCache("TeaCache", "TeaCache", "rel_l1_thresh",
              (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 200.0, 300.0, 500.0, 700.0, 1000.0,
               1500.0, 2000.0),
              (("model_type", "wan2.1_t2v_1.3B"), ("start_percent", 0.0), ("end_percent", 1.0),
               ("cache_device", "cuda")),  # "cuda" means ComfyUI's compute device (the CPU in CPU mode)
              ("WAN21_T2V",), "welltop-cn/ComfyUI-TeaCache"),
    PeerCache("MagCache", "MagCache", "magcache_thresh", (0.0, 0.003, 0.01, 0.02, 0.03, 0.04, 0.06, 0.1, 0.15, 0.2, 0.3),
              (("model_type", "wan2.1_t2v_1.3B"), ("retention_ratio", 0.2), ("magcache_K", 4), ("start_step", 0),
               ("end_step", -1)),
              ("WAN21_T2V",), "Zehong-Ma/ComfyUI-MagCache"),
    PeerCache("First Block Cache", "ApplyFBCacheOnModel", "residual_diff_threshold", (0.0, 0.05, 0.1, 0.2, 0.4),
              (("object_to_patch", "diffusion_model"), ("start", 0.0), ("end", 1.0),
               ("max_consecutive_cache_hits", -1)),
              (), "chengzeyi/Comfy-WaveSpeed",
              note="none the peer benchmark samples: it looks for transformer_blocks, double_blocks or joint_blocks, "
                   "which WanModel and Cosmos3 lack"),
)


REMOVED_IMPORTS = (("comfy.ldm.lightricks.model", "precompute_freqs_cis"),)
"""Names the packs import at load time that newer ComfyUI removed (module, name); see the module docstring."""


def install_stand_ins() -> list[str]:
    """Put a stand-in at each name of :data:`REMOVED_IMPORTS` this ComfyUI lacks, one that raises a clear error
    when called, so that the packs import. Returns the dotted names it installed (empty on older ComfyUI)."""
    import importlib

    installed_names = []
    for module_name, name in REMOVED_IMPORTS:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            continue

        def removed(*_args, _where=f"{module_name}.{name}", **_kwargs):
            raise RuntimeError(f"{_where} is not in this ComfyUI; the peer cache pack's code path that calls it "
                               "needs an older ComfyUI")

        setattr(module, name, removed)
        installed_names.append(f"{module_name}.{name}")
    return installed_names


def load_peer_packs(ns, folder: str | os.PathLike | None = None, stand_ins: bool = True) -> dict[str, bool]:
    """Load every pack folder of ``folder`` (default ``$PEER_CACHES_PATH``, else ``<ComfyUI>/custom_nodes``) with
    ComfyUI's own loader into the harness session ``ns``, after :func:`install_stand_ins` unless ``stand_ins`` is
    False (the packs as published). Returns folder name -> loaded (False: ComfyUI logged the import error)."""
    from seacache_testing.comfyui_harness import load_custom_node_folders

    if stand_ins:
        install_stand_ins()
    return load_custom_node_folders(ns, folder or os.environ.get(PEER_CACHES_ENV) or ns.path / "custom_nodes")


def installed(ns) -> list[PeerCache]:
    """The peer caches whose node id is registered in this ComfyUI session."""
    return [peer for peer in PEER_CACHES if peer.node_id in ns.nodes.NODE_CLASS_MAPPINGS]


def model_config_name(model) -> str:
    """The ComfyUI model config class of a MODEL (``WAN21_T2V``, ``Flux``, ...), what ``supports`` matches."""
    return type(model.model.model_config).__name__


def supports(peer: PeerCache, model) -> bool:
    """Whether ``peer`` has settings for this MODEL's architecture (its model config is one the peer supports)."""
    return model_config_name(model) in peer.supported_configs


def apply(ns, peer: PeerCache, model, knob_value: float):
    """The MODEL ``peer``'s node returns for ``model`` at ``knob_value`` (its other inputs fixed), run the way
    ComfyUI's executor runs a node. At the grid's first value (0) the packs hand back the input MODEL itself."""
    if not supports(peer, model):
        raise ValueError(f"{peer.name} does not support {model_config_name(model)} models (it supports "
                         f"{', '.join(peer.supported_configs) or peer.note}); check "
                         "supports(peer, model) first")
    return ns.run_node(peer.node_id, model=model, **peer.inputs(knob_value)).outputs[0]
