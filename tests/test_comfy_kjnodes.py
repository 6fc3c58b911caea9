"""kijai/ComfyUI-KJNodes' model-patch nodes with SeaCache Apply (needs COMFYUI_PATH and the pack in
$ECOSYSTEM_PACKS_PATH or ComfyUI's custom_nodes; tested at the commit of ``ecosystem_packs.KJNODES``), each placed
before and after SeaCache Apply on ComfyUI's tiny Wan 2.1, HunyuanVideo, Flux, LTX-Video and LTX-2 and this pack's
native Cosmos3, run as ComfyUI runs the nodes (``seacache_testing/kjnodes_cases.py``).

- Every patch composes: threshold 0 is bit-identical to the graph without SeaCache, and SeaCache Apply's defaults
  reuse with an error within 1.5x of SeaCache alone's, every call through the seam.
- Attention replacements (Sage and flash attention through ``optimized_attention_override``, NABLA sparse attention,
  the memory-efficient Sage object patches): the override stays on the MODEL SeaCache hands the sampler, and every
  computed stack call runs it exactly as often as without SeaCache; reused calls run no attention. The CUDA kernels
  are CPU stand-ins (``seacache_testing/kjnodes_pack.py``); the GPU run with the real kernels is the GPU check's.
- torch.compile nodes (a graph-counting ``aot_eager`` backend in place of inductor): decisions and output equal
  SeaCache uncompiled, also when TorchCompileModelAdvanced compiles the whole model with its guard filter, which
  ignores changes to ``transformer_options`` (on ComfyUI 0.3.64 that failed inside the model before the block seam's
  patch was kept out of the traced graphs); and when SeaCache stops caching mid-run under that compile, on each seam
  that reads the call inside the model (the native Cosmos3's generator stack, Wan's block stack, Lumina 2's
  diffusion-model call), the run ends exact (it failed with KeyError 'seacache_call' before those hooks were kept out
  of the traced graphs too).
- KJNodes' memory-factor override and SeaCache's residual history are both in ComfyUI's memory estimate.
- Nodes that do nothing or fail on their own at this commit (``WanVideoTeaCacheKJ``, ``SkipLayerGuidanceWanVideo``)
  do the same with SeaCache.

Nodes of the pack's LTXV module (LTX-Video and LTX-2 patches, the memory-efficient Sage patches) do not import on
ComfyUI 0.3.64 (the module imports a name that ComfyUI's LTX nodes added later); their tests skip there, saying so.

GPU check (not run here): the same graphs on CUDA with the real kernels, sageattention 2.2 installed:
PathchSageAttentionKJ (auto) and WanVideoMemoryEfficientSageAttentionPatch on the tiny Wan and Cosmos3 in bf16, before
and after SeaCache Apply (threshold 0 bit-identical, kernel calls per executed layer unchanged, counted by wrapping
``sageattention.sageattn``); TorchCompileModelAdvanced with inductor, blocks only and whole model (decisions equal,
relative error below 1e-3 as in tests/test_cuda.py); ModelMemoryUseReportPatch (CUDA peak-memory callbacks).
"""

from __future__ import annotations

import sys

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from seacache_testing import kjnodes_cases as cases
from seacache_testing import ecosystem_packs, kjnodes_pack, tiny_comfy_models
from seacache_testing.anymodel_runs import last_report
from seacache_testing.comfy_runs import load_tiny


@pytest.fixture(scope="module")
def kj(comfy, pack):
    """KJNodes loaded by ComfyUI's loader beside this pack (its ``pack`` fixture: one torch thread for the tiny
    models); skips naming the pack and its commit where it is missing or does not load."""
    why = ecosystem_packs.load(comfy, ecosystem_packs.KJNODES)
    if why:
        pytest.skip(why)


class Models:
    """Each tiny model a case samples, built once per module: ``get(name)`` -> (MODEL, Sampling, SeaCache alone's
    error at its defaults)."""

    def __init__(self, comfy, tmp_path_factory):
        self.comfy, self.tmp_path_factory, self.built = comfy, tmp_path_factory, {}

    def get(self, name: str):
        if name not in self.built:
            if name == cases.COSMOS3:
                tiny = load_tiny(self.comfy, self.tmp_path_factory)
                model, sampling = tiny.model, cases.cosmos3_sampling(tiny)
            else:
                model, sampling = tiny_comfy_models.build(name), cases.core_sampling(self.comfy, name)
            self.built[name] = model, sampling, cases.alone_error(self.comfy, model, sampling)
        return self.built[name]


@pytest.fixture(scope="module")
def models(comfy, kj, tmp_path_factory):
    return Models(comfy, tmp_path_factory)


def registered_or_skip(comfy, node: str, model: str = cases.WAN) -> None:
    """Skip, saying why, when this ComfyUI lacks the node (its KJNodes module did not import) or the model class."""
    if node not in comfy.nodes.NODE_CLASS_MAPPINGS:
        pytest.skip(f"KJNodes' {node} is not registered on ComfyUI {comfy.version}: the pack module defining it did "
                    "not import here (its import error is in the log)")
    if model != cases.COSMOS3 and tiny_comfy_models.missing(model):
        pytest.skip(tiny_comfy_models.missing(model))


ALL_CASES = cases.ATTENTION_CASES + cases.MODEL_CASES


@pytest.mark.parametrize("placement", cases.PLACEMENTS)
@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_patch_composes_before_and_after_seacache_apply(comfy, kj, models, case, placement):
    """Threshold 0 bit-identical to the patch alone; SeaCache Apply's defaults reuse, every call through the seam,
    with an error within 1.5x of SeaCache alone's on the same model."""
    registered_or_skip(comfy, case.node, case.model)
    model, sampling, alone = models.get(case.model)
    with kjnodes_pack.counting(comfy, case.node, case.kernel, kjnodes_pack.KernelCalls()):
        row = cases.measure(comfy, case, model, sampling, placement, alone)
    print(row)
    assert row["exact"], "threshold 0 must be bit-identical to the same graph without SeaCache"
    assert row["reused"] > 0 and row["uncached_calls"] == 0
    assert 0 < row["error"] <= 1.5 * row["alone_error"]


KERNEL_CASES = [case for case in ALL_CASES if case.kernel is not None]


@pytest.mark.parametrize("case", KERNEL_CASES, ids=lambda c: c.name)
def test_attention_replacement_runs_on_every_computed_stack_call(comfy, kj, models, case):
    """The attention a patch installs (a counting CPU stand-in for a CUDA kernel, or the pack's sparse attention)
    runs as often per executed stack layer with SeaCache as without it, before or after SeaCache Apply, and as often
    per model call outside the stack (HunyuanVideo's token refiner): the override reaches every computed call, and
    reused calls run none inside the skipped stack."""
    registered_or_skip(comfy, case.node, case.model)
    model, sampling, _ = models.get(case.model)
    calls = kjnodes_pack.KernelCalls()
    stack = kjnodes_pack.StackLayers(model.model.diffusion_model, calls)
    try:
        with kjnodes_pack.counting(comfy, case.node, case.kernel, calls):
            sampling.run(cases.patch(comfy, case, model, sampling))
            per_layer, outside, layers_plain = stack.inside / stack.runs, calls.calls - stack.inside, stack.runs
            assert stack.inside > 0 and per_layer == int(per_layer), (stack.inside, stack.runs)
            for placement in cases.PLACEMENTS:
                calls.calls, stack.runs, stack.inside = 0, 0, 0
                patched = cases.graph(comfy, case, model, sampling, placement)
                override = patched.model_options["transformer_options"].get("optimized_attention_override")
                assert (override is not None) == (case.kernel != "quantized")  # the others patch attention modules
                sampling.run(patched)
                assert last_report(patched)["reused"] > 0 and 0 < stack.runs < layers_plain
                assert stack.inside == per_layer * stack.runs, (placement, stack.inside, per_layer, stack.runs)
                assert calls.calls - stack.inside == outside, placement
    finally:
        stack.close()
    print(f"{case.name}: {per_layer:g} attention calls per stack layer, {outside} outside the stack per run; "
          f"{stack.runs} of {layers_plain} layer runs with SeaCache")


COMPILE_CASES = (
    ("TorchCompileModelAdvanced", cases.WAN, dict(compile_transformer_blocks_only=True)),
    ("TorchCompileModelAdvanced", cases.WAN, dict(compile_transformer_blocks_only=False)),
    ("TorchCompileModelAdvanced", cases.COSMOS3, dict(compile_transformer_blocks_only=True)),
    ("TorchCompileModelWanVideoV2", cases.WAN, dict(compile_transformer_blocks_only=True)),
    ("TorchCompileModelFluxAdvancedV2", "flux", dict(double_blocks=True, single_blocks=True)),
)
# The nodes set torch._dynamo's recompile limit and force_parameter_static_shapes process-wide: given torch's own
# defaults (8, True), they leave the session as they found it.
COMPILE_DEFAULTS = {
    "TorchCompileModelAdvanced": dict(fullgraph=False, mode="default", dynamic="false", dynamo_cache_size_limit=8,
                                      debug_compile_keys=False),
    "TorchCompileModelWanVideoV2": dict(fullgraph=False, mode="default", dynamic=False, dynamo_cache_size_limit=8,
                                        force_parameter_static_shapes=True),
    "TorchCompileModelFluxAdvancedV2": dict(fullgraph=False, mode="default", dynamic=False, dynamo_cache_size_limit=8,
                                            force_parameter_static_shapes=True),
}


def decisions(model) -> list[str]:
    return [record["decision"] for record in last_report(model)["records"]]


def compile_node(comfy, node: str, model, backend, **inputs):
    """``model`` through the torch.compile node ``node`` at :data:`COMPILE_DEFAULTS` (``inputs`` added), compiling
    with ``backend``, run as ComfyUI runs the node."""
    return comfy.run_node(node, model=model, backend=backend, **COMPILE_DEFAULTS[node], **inputs).outputs[0]


@pytest.mark.parametrize("node,name,inputs", COMPILE_CASES, ids=[f"{n} on {m} {i}" for n, m, i in COMPILE_CASES])
def test_torch_compile_nodes_compose(comfy, kj, models, node, name, inputs):
    """The node run as ComfyUI runs it with a graph-counting ``aot_eager`` backend in place of inductor (minutes to
    compile on this CPU): threshold 0 bit-identical to the compiled graph without SeaCache, before and after SeaCache
    Apply; at the defaults the decisions and output of SeaCache uncompiled. TorchCompileModelAdvanced with its
    default (blocks only) compiles the native Cosmos3's ``layers.N`` modules, which the model runs through their
    generator and text steps, not ``forward``: nothing is compiled there."""
    model, sampling, _ = models.get(name)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")

    def compiled(m):
        return compile_node(comfy, node, m, counter, **inputs)

    eager = cases.seacache_apply(comfy, model)
    eager_out = sampling.run(eager)
    plain = sampling.run(compiled(model))
    for placement in cases.PLACEMENTS:
        slot = (lambda m: cases.seacache_apply(comfy, compiled(m), threshold=0.0)) if placement == "before" else \
            (lambda m: compiled(cases.seacache_apply(comfy, m, threshold=0.0)))
        assert torch.equal(sampling.run(slot(model)), plain), placement
        cached = cases.seacache_apply(comfy, compiled(model)) if placement == "before" else \
            compiled(cases.seacache_apply(comfy, model))
        out = sampling.run(cached)
        assert decisions(cached) == decisions(eager) and last_report(cached)["uncached_calls"] == 0
        assert ((out - eager_out).abs().max() / eager_out.abs().max()).item() < 1e-5, placement
    print(f"{node} {inputs} on {name}: {counter.frame_count} graphs compiled")
    assert (counter.frame_count == 0) == (name == cases.COSMOS3 and inputs.get("compile_transformer_blocks_only"))
    torch._dynamo.reset()


STOP_AT = 5
"""The decision at which SeaCache's own code fails in the stop test: the calls before it pass the seam."""


@pytest.mark.parametrize("name", (cases.COSMOS3, cases.WAN, "lumina2"))
def test_caching_stopped_mid_run_under_a_whole_model_compile(comfy, pack, kj, models, monkeypatch, name):
    """SeaCache's own code failing during sampling stops caching and the run still ends, also when
    TorchCompileModelAdvanced compiles the whole model after SeaCache Apply: its guard filter ignores
    ``transformer_options``, so a seam hook traced into the compiled graphs would take the path of the gated calls
    before the stop on the later calls, which carry no SeaCache call. One model per seam hook that reads the call
    inside the model: the native Cosmos3's generator stack, Wan's block stack, and Lumina 2's diffusion-model call
    (its forward hands ``transformer_options`` on by keyword). Threshold 0: bit-identical to the compiled graph
    without SeaCache, with the report of the same run uncompiled. The Cosmos3 and Lumina 2 runs failed with
    KeyError 'seacache_call' on ComfyUI 0.3.64 and 0.33 before their hooks were kept out of the traced graphs."""
    model, sampling, _ = models.get(name)
    run_module = sys.modules[f"{pack.__name__}.seacache_core.run"]
    decide, decided = run_module.SeaCacheRun.decide, []

    def failing_at_stop(self, *args, **kwargs):
        decided.append(len(decided) + 1)
        if decided[-1] == STOP_AT:
            raise RuntimeError("injected failure")
        return decide(self, *args, **kwargs)

    monkeypatch.setattr(run_module.SeaCacheRun, "decide", failing_at_stop)
    eager = cases.seacache_apply(comfy, model, threshold=0.0)
    sampling.run(eager)
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    whole = dict(compile_transformer_blocks_only=False)
    plain = sampling.run(compile_node(comfy, "TorchCompileModelAdvanced", model, counter, **whole))
    decided.clear()
    cached = compile_node(comfy, "TorchCompileModelAdvanced", cases.seacache_apply(comfy, model, threshold=0.0),
                          counter, **whole)
    out = sampling.run(cached)
    torch._dynamo.reset()
    report, expected = last_report(cached), last_report(eager)
    print(f"{name}: {report['seam']}, {counter.frame_count} graphs; {report['calls']} calls passed the seam, "
          f"{report['uncached_calls']} ran whole after the stop")
    assert counter.frame_count > 0 and torch.equal(out, plain)
    assert "RuntimeError: injected failure" in report["stopped"] and report["calls"] == STOP_AT - 1
    assert [report[key] for key in ("stopped", "calls", "uncached_calls")] == \
        [expected[key] for key in ("stopped", "calls", "uncached_calls")]


@pytest.mark.parametrize("placement", cases.PLACEMENTS)
def test_memory_factor_override_and_the_residual_history_are_both_estimated(comfy, kj, models, asked, placement):
    """ModelMemoryUsageFactorOverride scales the model's own estimate during ComfyUI's memory planning and SeaCache
    adds its history to it, in either order: what ComfyUI frees grows by exactly SeaCache's history."""
    model, sampling, _ = models.get(cases.WAN)
    case = next(c for c in cases.MODEL_CASES if c.node == "ModelMemoryUsageFactorOverride" and c.model == cases.WAN)
    factor_before, start = model.model.memory_usage_factor, len(asked)  # the model's build sampled already
    sampling.run(model)
    sampling.run(cases.seacache_apply(comfy, model))
    sampling.run(cases.patch(comfy, case, model, sampling))
    sampling.run(cases.graph(comfy, case, model, sampling, placement))
    plain, seacache, factor, both = asked[start:]
    assert factor > plain and seacache > plain
    assert both - factor == pytest.approx(seacache - plain)
    assert "memory_required" not in vars(model.model) and model.model.memory_usage_factor == factor_before


def test_deprecated_teacache_node_returns_its_input_model(comfy, kj, models):
    """KJNodes' WanVideoTeaCacheKJ is a deprecated no-op at this commit: it hands back the MODEL it gets (nothing of a
    step cache for SeaCache to refuse), also after SeaCache Apply."""
    model, sampling, _ = models.get(cases.WAN)
    case = next(c for c in cases.MODEL_CASES if c.node == "WanVideoTeaCacheKJ")
    applied = cases.seacache_apply(comfy, model)
    assert cases.patch(comfy, case, model, sampling) is model
    assert cases.patch(comfy, case, applied, sampling) is applied


def test_skip_layer_guidance_wanvideo_fails_on_its_own_and_the_same_with_seacache(comfy, kj, models):
    """KJNodes' deprecated SkipLayerGuidanceWanVideo reads ``transformer_options`` from the block patch's second
    argument, which core Wan never fills (its message: it needs TeaCacheKJ, itself a no-op now): the first step fails
    without SeaCache, and identically before or after SeaCache Apply."""
    model, sampling, _ = models.get(cases.WAN)
    inputs = dict(blocks="1", start_percent=0.0, end_percent=1.0)
    skip = lambda m: comfy.run_node("SkipLayerGuidanceWanVideo", model=m, **inputs).outputs[0]  # noqa: E731
    for graph in (skip(model), cases.seacache_apply(comfy, skip(model)), skip(cases.seacache_apply(comfy, model))):
        with pytest.raises(ValueError, match="only works with TeaCacheKJ"):
            sampling.run(graph)
