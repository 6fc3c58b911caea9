"""Cache-DiT's ComfyUI pack as a peer cache of the peer benchmark, beside ``peer_packs`` and ``spectrum_packs``: its
Wan node, the schedule that sets its speed, and how to apply it so that only the MODEL it returns runs it.

Jasonzzt/ComfyUI-CacheDiT (the pack ComfyUI users install for Cache-DiT; xlite-dev/ComfyUI-CacheDiT is its earlier
home, rakib91221's and JWLHS's are forks with the same Wan node) registers ``WanCacheOptimizer`` ("CacheDiT Wan
Accelerator") for core Wan 2.1 / 2.2. It does not call the cache-dit library: at sampling (an OUTER_SAMPLE wrapper)
it replaces the shared WanModel's ``forward`` with one that counts the model calls of the run, computes the first
``warmup_steps`` calls, then computes call ``c`` only when ``(c - warmup_steps) % skip_interval == 0`` and returns
the last computed output on the others: a content-blind schedule with whole-output reuse, one call per step when
cond and uncond are batched (as bench_peers samples). Its ``skip_interval`` (2 to 10 in the node) is the knob at
the node's default ``warmup_steps`` (4). Facts read and measured at ab1a1448 (2026-04-15) on ComfyUI 0.33.0.

The node leaves state on the WanModel that every clone of the MODEL shares: the patched ``forward`` stays after
sampling, so the input MODEL and its other clones then run the schedule too, continuing the last run's call count
and reusing its last output (measured: the input MODEL computed 18 of 35 calls after a run at interval 2); and
``_wan_cache_config``, with which the node, asked again for the same settings, returns its input MODEL unpatched.
:func:`apply` clears the latter and gives the returned clone a wrapper that removes the forward patch after each
of its sampling runs; the returned MODEL still samples as the node made it (the pack re-patches at each run).
"""

from __future__ import annotations

from dataclasses import dataclass

from seacache_testing import peer_packs
from seacache_testing.peer_packs import PeerCache

RESTORE_KEY = "bench_peers_cachedit_restore"
"""Key of the OUTER_SAMPLE wrapper :func:`apply` adds to remove the node's forward patch after a run."""

PATCHED_FORWARD = "_original_forward_wan"  # the node's saved forward: present while its patch is on the model
SHARED_CONFIG = "_wan_cache_config"  # the node's last settings, on the shared WanModel


@dataclass(frozen=True)
class IntervalPeer(PeerCache):
    """A peer cache whose knob is a whole interval of a content-blind schedule: ``warmup`` calls computed, then
    every ``interval``-th; ``grid`` holds intervals that all skip (none is "uncached", unlike ``PeerCache``'s
    first value). Its full calls are known before it runs, so the benchmark plans its settings."""

    warmup: int = 0

    def inputs(self, knob_value: float) -> dict:
        """The node's inputs besides ``model``; the interval must be a whole number of calls."""
        if knob_value != int(knob_value):
            raise ValueError(f"{self.name}'s {self.knob} is a whole number of calls, got {knob_value}")
        return {**dict(self.fixed), "warmup_steps": self.warmup, self.knob: int(knob_value)}

    def computed_calls(self, steps: int, interval: int) -> int:
        """Model calls computed in a run of ``steps`` calls at ``interval``."""
        return min(steps, self.warmup) + max(0, steps - self.warmup) // int(interval)

    def planned(self, steps: int, targets) -> tuple[float, ...]:
        """The grid's intervals whose computed calls are nearest each target from above and from below (where the
        grid reaches; a target above every interval's calls gets the smallest interval)."""
        calls = {interval: self.computed_calls(steps, interval) for interval in self.grid}
        chosen = set()
        for target in targets:
            above = [i for i in calls if calls[i] >= target]
            below = [i for i in calls if calls[i] <= target]
            chosen.add(max(above, key=lambda i: (-calls[i], i)) if above else min(calls))
            if below:
                chosen.add(min(below, key=lambda i: (-calls[i], i)))
        return tuple(float(i) for i in sorted(chosen))


CACHEDIT_PEERS = (
    IntervalPeer("CacheDiT Wan", "WanCacheOptimizer", "skip_interval", (2, 3, 4, 5, 6, 7, 8, 9, 10),
                 (("enable", True), ("print_summary", False)), ("WAN21_T2V", "WAN21_I2V"),
                 "Jasonzzt/ComfyUI-CacheDiT", warmup=4),
)


def installed(ns) -> list[IntervalPeer]:
    """The Cache-DiT peers whose node id is registered in this ComfyUI session (``peer_packs.load_peer_packs``
    loads their folder with the others')."""
    return [peer for peer in CACHEDIT_PEERS if peer.node_id in ns.nodes.NODE_CLASS_MAPPINGS]


def remove_forward_patch(diffusion_model) -> bool:
    """Undo the node's ``forward`` replacement on ``diffusion_model`` (the class's forward runs again). Returns
    whether a patch was there."""
    patched = PATCHED_FORWARD in vars(diffusion_model)
    if patched:
        vars(diffusion_model).pop("forward", None)
        delattr(diffusion_model, PATCHED_FORWARD)
    return patched


def apply(ns, peer: IntervalPeer, model, knob_value: float):
    """The MODEL ``peer``'s node returns for ``model`` at ``knob_value`` (``peer_packs.apply``: unsupported models
    raise before the node runs), isolated from the MODEL's other clones (see the module docstring): the node's
    settings are cleared from the shared diffusion model, and the returned clone removes the forward patch after
    each of its runs."""
    import comfy.patcher_extension

    patched = peer_packs.apply(ns, peer, model, knob_value)
    diffusion_model = patched.model.diffusion_model
    if hasattr(diffusion_model, SHARED_CONFIG):
        delattr(diffusion_model, SHARED_CONFIG)

    def restore_after(executor, *args, **kwargs):
        try:
            return executor(*args, **kwargs)
        finally:
            remove_forward_patch(diffusion_model)

    patched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.OUTER_SAMPLE, RESTORE_KEY, restore_after)
    return patched
