"""The graphs users build with kijai/ComfyUI-KJNodes' model-patch nodes and SeaCache Apply, on ComfyUI's own tiny
random-weight models and this pack's native Cosmos3: each patch node placed before SeaCache Apply (loader -> patch
-> SeaCache Apply -> sampler) and after it (loader -> SeaCache Apply -> patch -> sampler), run as ComfyUI runs the
node. Used by ``tests/test_comfy_kjnodes.py``; the pack is found and loaded by :mod:`.ecosystem_packs`.

:func:`measure` reports for one case and placement: whether threshold 0 is bit-identical to the graph without
SeaCache (the patch alone), the error at SeaCache Apply's own defaults against that graph (relative L2 of the final
latent), SeaCache alone's error on the same model without the patch, and the reuse count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from . import tiny_comfy_models
from .anymodel_runs import last_report, sample
from .composition_cases import rel_error, with_defaults

STEPS = 20
CFG = 5.0
PLACEMENTS = ("before", "after")
"""Where the patch node sits relative to SeaCache Apply in the model chain."""


def seacache_apply(ns, model, **inputs):
    """SeaCache Apply at its node's own defaults (unless overridden), run as ComfyUI runs it."""
    return with_defaults(ns, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, **inputs)


@dataclass(frozen=True)
class Sampling:
    """How one model is sampled in a case: ``run(model)`` gives the final latent, ``latent`` the LATENT the patch
    nodes that read the frame count get, ``conditioning`` a prompt conditioning (NAG's negative prompt)."""

    run: Callable
    latent: dict
    conditioning: list | None = None


def core_sampling(ns, name: str) -> Sampling:
    """A tiny core model's sampling: CFG 5, euler, 20 steps (``anymodel_runs.sample``)."""
    spec = tiny_comfy_models.spec_of(name)
    return Sampling(lambda model: sample(ns, model, spec, steps=STEPS, cfg=CFG),
                    tiny_comfy_models.empty_latent(spec), tiny_comfy_models.conditioning(spec, seed=5))


def cosmos3_sampling(tiny) -> Sampling:
    """The native Cosmos3's sampling: its prompt nodes and scheduler, CFG 6, uni_pc_bh2, 20 steps."""
    return Sampling(lambda model: tiny.sample(model, steps=STEPS), tiny.empty())


@dataclass(frozen=True)
class PatchCase:
    """One KJNodes patch node on one model: ``node`` its id, ``inputs(sampling)`` its inputs besides ``model``;
    ``kernel`` names the attention its patch ends in, counted (:func:`.kjnodes_pack.counting`): "modules"
    (``sageattention`` / ``flash_attn``) and "quantized" (the pack's INT8/FP8 Sage call) are CUDA kernels replaced
    by a CPU stand-in, "sparse" is the pack's NABLA attention itself."""

    node: str
    model: str
    inputs: Callable[[Sampling], dict] = field(default=lambda sampling: {})
    kernel: str | None = None
    label: str = ""

    @property
    def name(self) -> str:
        return f"{self.node}{f' ({self.label})' if self.label else ''} on {self.model}"


def patch(ns, case: PatchCase, model, sampling: Sampling):
    """The MODEL the case's node returns for ``model``, run as ComfyUI's executor runs it."""
    return ns.run_node(case.node, model=model, **case.inputs(sampling)).outputs[0]


def graph(ns, case: PatchCase, model, sampling: Sampling, placement: str, **seacache):
    """The MODEL the sampler gets: the patch before or after SeaCache Apply (``seacache``: its inputs)."""
    if placement == "before":
        return seacache_apply(ns, patch(ns, case, model, sampling), **seacache)
    return patch(ns, case, seacache_apply(ns, model, **seacache), sampling)


def measure(ns, case: PatchCase, model, sampling: Sampling, placement: str, alone_error: float) -> dict:
    """The case's row for one placement: exact (threshold 0 bit-identical to the patch alone), error at SeaCache
    Apply's defaults against the patch alone, SeaCache alone's error (given), reused and gated calls."""
    plain = sampling.run(patch(ns, case, model, sampling))
    exact = torch.equal(sampling.run(graph(ns, case, model, sampling, placement, threshold=0.0)), plain)
    cached_model = graph(ns, case, model, sampling, placement)
    cached = sampling.run(cached_model)
    report = last_report(cached_model)
    return dict(case=case.name, placement=placement, exact=exact, error=rel_error(cached, plain),
                alone_error=alone_error, reused=report["reused"], calls=report["calls"], seam=report["seam"],
                uncached_calls=report["uncached_calls"])


def alone_error(ns, model, sampling: Sampling) -> float:
    """SeaCache alone at its defaults on ``model``: the error against the model uncached."""
    return rel_error(sampling.run(seacache_apply(ns, model)), sampling.run(model))


def latent_of(sampling: Sampling) -> dict:
    return {"latent": sampling.latent}


WAN = "wan21_t2v"
COSMOS3 = "cosmos3"
SAGE, SAGE_LABEL = dict(sage_attention="auto"), "sage_attention auto"
NABLA = dict(window_time=11, window_width=3, window_height=3, sparsity=0.9, torch_compile=False)
NABLA_LABEL = "sparse, torch_compile off"
NAG = dict(nag_scale=11.0, nag_alpha=0.25, nag_tau=2.5)


def sage(model: str) -> PatchCase:
    return PatchCase("PathchSageAttentionKJ", model, lambda s: SAGE, kernel="modules", label=SAGE_LABEL)


def nabla(model: str) -> PatchCase:
    return PatchCase("NABLA_AttentionKJ", model, lambda s: {**NABLA, **latent_of(s)}, kernel="sparse",
                     label=NABLA_LABEL)


ATTENTION_CASES = (
    sage(WAN), PatchCase("PatchFlashAttentionKJ", WAN, kernel="modules"), nabla(WAN),
    sage("hunyuan_video"), sage("flux"),
    sage(COSMOS3), PatchCase("PatchFlashAttentionKJ", COSMOS3, kernel="modules"), nabla(COSMOS3),
    PatchCase("WanVideoMemoryEfficientSageAttentionPatch", WAN, kernel="quantized"),
    PatchCase("LTX2MemoryEfficientSageAttentionPatch", "ltxav", lambda s: {"triton_kernels": False},
              kernel="quantized"),
)
"""Attention replacements: through ComfyUI's ``optimized_attention_override`` transformer option, and ("quantized")
as object patches of the blocks' attention modules."""

MODEL_CASES = (
    PatchCase("WanVideoEnhanceAVideoKJ", WAN, lambda s: {"weight": 2.0, **latent_of(s)}),
    PatchCase("WanVideoNAG", WAN, lambda s: {"conditioning": s.conditioning, **NAG}),
    PatchCase("WanChunkFeedForward", WAN, lambda s: {"chunks": 2, "dim_threshold": 1024}),
    PatchCase("ApplyRifleXRoPE_WanVideo", WAN, lambda s: {"k": 6, **latent_of(s)}),
    PatchCase("ApplyRifleXRoPE_HunuyanVideo", "hunyuan_video", lambda s: {"k": 4, **latent_of(s)}),
    PatchCase("LTXVEnhanceAVideoKJ", "ltxv", lambda s: {"weight": 4.0, **latent_of(s)}),
    PatchCase("LTXVChunkFeedForward", "ltxv", lambda s: {"chunks": 2, "dim_threshold": 0}),
    PatchCase("LTX2AttentionTunerPatch", "ltxav", lambda s: dict(blocks="", video_scale=1.2, audio_scale=0.8,
                                                                 audio_to_video_scale=1.0, video_to_audio_scale=1.0,
                                                                 triton_kernels=False)),
    PatchCase("CFGZeroStarAndInit", WAN, lambda s: {"use_zero_init": True, "zero_init_steps": 0}),
    PatchCase("CFGZeroStarAndInit", COSMOS3, lambda s: {"use_zero_init": True, "zero_init_steps": 0}),
    PatchCase("ModelPatchTorchSettings", WAN, lambda s: {"enable_fp16_accumulation": True}),
    PatchCase("ModelMemoryUsageFactorOverride", WAN, lambda s: {"memory_usage_factor": 2.0}),
    PatchCase("ModelMemoryUsageFactorOverride", COSMOS3, lambda s: {"memory_usage_factor": 2.0}),
    PatchCase("WanVideoTeaCacheKJ", WAN, lambda s: dict(rel_l1_thresh=0.275, start_percent=0.1, end_percent=1.0,
                                                     cache_device="offload_device", coefficients="i2v_480")),
)
"""Patches inside the stack (object patches of blocks' modules), outside it (rotary embedder), on the guidance
(CFG function), on the run (callbacks, the memory estimate) and KJNodes' deprecated TeaCache node."""
