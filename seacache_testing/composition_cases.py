"""Graphs users build around SeaCache Apply, on ComfyUI's own tiny random-weight Wan 2.1 (``tiny_comfy_models``):
core nodes chained before or after SeaCache Apply, sampled with ComfyUI's own sampler nodes. Used by
``tests/test_comfy_composition.py`` and ``benchmarks/composition_table.py`` (which prints the table in
docs/any-model.md).

Each :class:`Case` builds the user's graph around a "SeaCache slot" (SeaCache Apply at some settings, or nothing
for the graph without SeaCache); :func:`measure` reports, for that graph: whether threshold 0 is bit-identical to
the graph without SeaCache, the default-threshold error against it (relative L2 of the final latent), SeaCache
alone's error on the same model and latent without the other node, and the reuse count.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import tiny_comfy_models
from .anymodel_runs import last_report, sample, seacache

MODEL = "wan21_t2v"
CFG = 5.0


def with_defaults(ns, node: str, hidden: dict | None = None, **inputs):
    """Run a core node with its schema defaults for every input not given; inputs this version's node does not
    have are left out (the nodes' inputs differ between ComfyUI versions). ``hidden``: the node's hidden inputs."""
    from . import comfyui_harness

    known = {}
    for item in comfyui_harness.node_class(ns, node).define_schema().inputs:
        if item.id in inputs:
            known[item.id] = inputs[item.id]
        elif getattr(item, "default", None) is not None:
            known[item.id] = item.default
    return ns.run_node(node, hidden=hidden, **known).outputs[0]


def identity_block(args, extra):
    """A block-replace patch that wraps one block and calls the original (what block-patch nodes do)."""
    return extra["original_block"](args)


def block_patch(ns, model):
    """A node that replaces the middle (second) transformer block of a Wan model."""
    patched = model.clone()
    patched.set_model_patch_replace(identity_block, "dit", "double_block", 1)
    return patched


def skip_layer_guidance(ns, model):
    """Core SkipLayerGuidanceDiT skipping Wan's second block on every step (scale 3)."""
    return with_defaults(ns, "SkipLayerGuidanceDiT", model=model, double_layers="1", single_layers="", scale=3.0,
                         start_percent=0.0, end_percent=1.0)


def skip_layer_guidance_simple(ns, model):
    """Core SkipLayerGuidanceDiTSimple: the uncond pass with Wan's second block skipped, on every step."""
    return with_defaults(ns, "SkipLayerGuidanceDiTSimple", model=model, double_layers="1", single_layers="",
                         start_percent=0.0, end_percent=1.0)


def context_windows(schedule: str):
    """Core WanContextWindowsManual with this schedule: windows of 5 latent frames (17 real) overlapping by 2."""

    def node(ns, model):
        return with_defaults(ns, "WanContextWindowsManual", model=model, context_length=17, context_overlap=8,
                             context_schedule=schedule, freenoise=False)

    return node


@dataclass(frozen=True)
class Case:
    """A user's graph: ``build(ns, model, slot)`` returns the MODEL the sampler gets, ``slot`` placing SeaCache
    Apply (or nothing) where the user puts it; ``frames`` overrides the latent's frame count."""

    name: str
    build: Callable
    frames: int | None = None
    steps: int = 20


CASES = (
    Case("block-replace patch after SeaCache Apply", lambda ns, m, slot: block_patch(ns, slot(m))),
    Case("block-replace patch before SeaCache Apply", lambda ns, m, slot: slot(block_patch(ns, m))),
    Case("SkipLayerGuidanceDiT after SeaCache Apply", lambda ns, m, slot: skip_layer_guidance(ns, slot(m))),
    Case("SkipLayerGuidanceDiT before SeaCache Apply", lambda ns, m, slot: slot(skip_layer_guidance(ns, m))),
    Case("SkipLayerGuidanceDiTSimple after SeaCache Apply", lambda ns, m, slot: skip_layer_guidance_simple(ns, slot(m))),
    Case("WanContextWindowsManual (static windows) after SeaCache Apply", lambda ns, m, slot: context_windows("standard_static")(ns, slot(m)), frames=21, steps=30),
    Case("WanContextWindowsManual (static windows) before SeaCache Apply", lambda ns, m, slot: slot(context_windows("standard_static")(ns, m)), frames=21, steps=30),
    Case("WanContextWindowsManual (moving windows, default) after SeaCache Apply", lambda ns, m, slot: context_windows("standard_uniform")(ns, slot(m)), frames=21, steps=30),
    Case("WanContextWindowsManual (moving windows, default) before SeaCache Apply", lambda ns, m, slot: slot(context_windows("standard_uniform")(ns, m)), frames=21, steps=30),
)


def spec_for(case: Case):
    """The tiny model's spec, with the case's frame count."""
    spec = tiny_comfy_models.SPECS[MODEL]
    if case.frames is None:
        return spec
    return dataclasses.replace(spec, latent=(spec.latent[0], case.frames, *spec.latent[2:]))


def rel_error(out: torch.Tensor, reference: torch.Tensor) -> float:
    """Relative L2 distance of a final latent from the reference one."""
    return float((out - reference).norm() / reference.norm())


def measure(ns, case: Case, model=None) -> dict:
    """The case's row: exact (threshold 0 bit-identical), error, alone_error, reused, calls, seam."""
    model = model if model is not None else tiny_comfy_models.build(MODEL)
    spec = spec_for(case)

    def run(graph):
        return sample(ns, graph, spec, steps=case.steps, cfg=CFG)

    plain = run(case.build(ns, model, lambda m: m))
    exact = torch.equal(run(case.build(ns, model, lambda m: seacache(ns, m, threshold=0.0))), plain)
    slot = {}

    def apply(m):
        slot["model"] = seacache(ns, m)
        return slot["model"]

    cached = run(case.build(ns, model, apply))
    report = last_report(slot["model"])
    alone = seacache(ns, model)
    alone_error = rel_error(run(alone), run(model))
    return dict(case=case.name, steps=case.steps, exact=exact, error=rel_error(cached, plain), alone_error=alone_error,
                reused=report["reused"], calls=report["calls"], guidance_calls=report["guidance_calls"],
                guidance_followed=report["guidance_followed"], guidance_reused=report["guidance_reused"],
                seam=report["seam"], alone_reused=last_report(alone)["reused"])


def table(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    lines = ["| case (tiny Wan 2.1, CFG 5) | steps | threshold 0 bit-identical | error vs graph without SeaCache "
             "| SeaCache alone error | reused / gated calls | seam |", "| --- | ---: | --- | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['steps']} | {'yes' if r['exact'] else 'no'} | {r['error']:.4f} | "
                     f"{r['alone_error']:.4f} | {r['reused']} / {r['calls']} | {r['seam']} |")
    return "\n".join(lines)
