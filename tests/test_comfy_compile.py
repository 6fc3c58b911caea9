"""ComfyUI's core ``TorchCompileModel`` before and after SeaCache Apply on the native Cosmos3 (needs COMFYUI_PATH).

The node is run as ComfyUI runs it; only its backend is a graph counter around ``aot_eager``
(``torch._dynamo.testing.CompileCounterWithBackend``; the node's own choices, inductor and cudagraphs, take minutes
to compile on this CPU or need CUDA). An APPLY_MODEL wrapper reads the count before every model call. Either order:
the graphs are compiled during the first calls and never after, a second sampling run compiles nothing, and the
decisions and the output equal SeaCache without compilation.
"""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

STEPS = 20
WARMUP = 3  # calls: the first compiles, the second meets the reuse path, by the third dynamo has made the values
# that change per call dynamic (its automatic dynamic shapes: one recompile when a second value is seen)


@pytest.fixture(scope="module")
def compile_node(comfy):
    comfy.load_extra_nodes("nodes_torch_compile.py")
    return comfy


def counted_calls(tiny, model, counter):
    """The model with an APPLY_MODEL wrapper appending the compiled-graph count before each call."""
    counts = []

    def wrapper(executor, *args, **kwargs):
        counts.append(counter.frame_count)
        return executor(*args, **kwargs)

    watched = model.clone()
    watched.add_wrapper_with_key(tiny.ns.patcher_extension.WrappersMP.APPLY_MODEL, "test_compile_counter", wrapper)
    return watched, counts


def decisions(model):
    return [r["decision"] for r in model.model_options["transformer_options"]["seacache_settings"].last_run["records"]]


@pytest.mark.parametrize("order", ["compile, then SeaCache Apply", "SeaCache Apply, then compile"])
def test_torch_compile_model_node_compiles_during_warmup_only(tiny, compile_node, order):
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compile_model = lambda m: tiny.ns.run_node("TorchCompileModel", model=m, backend=counter).outputs[0]  # noqa: E731
    if order.startswith("compile"):
        model = tiny.seacache(compile_model(tiny.model))
    else:
        model = compile_model(tiny.seacache())
    model, counts = counted_calls(tiny, model, counter)
    eager_model = tiny.seacache()
    eager = tiny.sample(eager_model, steps=STEPS, sampler="euler")
    first = tiny.sample(model, steps=STEPS, sampler="euler")
    seen = decisions(model)
    assert seen == decisions(eager_model) and "reused" in seen[:WARMUP] and "computed" in seen
    graphs = counter.frame_count
    print(f"{order}: graphs compiled before each call {counts}, decisions {seen}")
    assert 0 < counts[WARMUP] == graphs  # every graph compiled during the warm-up calls ...
    assert counts[WARMUP:] == [graphs] * (STEPS - WARMUP)  # ... and none after
    second = tiny.sample(model, steps=STEPS, sampler="euler")
    assert counter.frame_count == graphs  # a new run (new session, new text K/V cache) recompiles nothing
    for out in (first, second):
        assert ((out - eager).abs().max() / eager.abs().max()).item() < 1e-5
    torch._dynamo.reset()
