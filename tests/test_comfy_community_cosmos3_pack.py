"""SeaCache Apply on the real community ComfyUI-Cosmos3 pack (RyukoMatoiFan/ComfyUI-Cosmos3 at b9226bf), through
ComfyUI's own nodes and the pack's own loader and nodes, on a tiny random-weight checkpoint in the pack's format.

Needs COMFYUI_PATH and the pack's folder (``$COSMOS3_COMMUNITY_PATH`` or ComfyUI's ``custom_nodes/ComfyUI-Cosmos3``);
skips, saying why, otherwise. Each case: threshold 0 is bit-identical to the pack alone, the defaults reuse calls
with a small error and run no generator layer on a reused call, and the input MODEL samples as before.

The MODEL comes from the pack's ``load_cosmos3_model`` (what its Cosmos3 Loader node returns as MODEL; the node
also builds a full-width Wan2.2 VAE and a Qwen2 tokenizer, which sampling does not use). Prompts go through the
pack's Cosmos3 Text Encode node with a character tokenizer in place of the Qwen2 vocabulary (a download). I2V is
tested with the conditioning the pack's Cosmos3 Image to Video node attaches (its encoded first frame and frame
mask), here a random latent instead of a VAE encode.
"""

from __future__ import annotations

import functools
import sys

import pytest
import torch

from seacache_testing import community_cosmos3_pack as community
from seacache_testing.anymodel_runs import last_report, seacache

STEPS = 10
LENGTH, SIZE = 9, 64  # pixels: 3 latent frames of 4 x 4
PROMPTS = ("a red fox runs through snow", "blurry")


class CharTokens:
    """The tokenizer half of the pack's text encoder: token ids from a prompt's characters (the pack's Qwen2
    vocabulary is a download; the model only sees ids below its vocabulary size)."""

    def tokenize(self, prompt, **template):
        return [ord(c) % community.TINY_CONFIG["vocab_size"] for c in prompt]


@pytest.fixture(scope="module")
def pack(comfy, tmp_path_factory):
    """The community pack loaded by ComfyUI, this pack loaded likewise, a tiny checkpoint in the pack's format
    and a loader for it."""
    from seacache_testing import comfyui_harness

    path = community.pack_path(comfy)
    module = community.load_pack(comfy, path)
    comfyui_harness.load_pack_with_comfyui_loader(comfy)
    model = community.submodule(module, "cosmos3.model")
    loader = community.submodule(module, "cosmos3.loader")
    root = community.write_checkpoint(tmp_path_factory.mktemp("community_cosmos3"), model.Cosmos3OmniTransformer)
    int4_root = community.write_checkpoint(tmp_path_factory.mktemp("community_cosmos3_int4"), model.Cosmos3OmniTransformer, int4_mlps=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield type("Pack", (), {"module": module, "model": model, "root": str(root), "load": staticmethod(
        lambda dtype="default", tower="both", int4=False: load(loader, int4_root if int4 else root, dtype, tower))})
    torch.set_num_threads(threads)


def load(loader, root, dtype, tower):
    """The pack's MODEL as its Cosmos3 Loader node returns it (ComfyUI runs nodes under inference mode)."""
    with torch.inference_mode():
        return loader.load_cosmos3_model(str(root), dtype, tower)


def encode(ns, und_tower=None):
    """Positive and negative CONDITIONING from the pack's Cosmos3 Text Encode node."""
    return [ns.run_node("Cosmos3TextEncode", text_encoder=CharTokens(), prompt=prompt, width=SIZE, height=SIZE,
                        num_frames=LENGTH, fps=24.0, add_resolution_template=False, add_duration_template=False,
                        und_tower=und_tower).outputs[0] for prompt in PROMPTS]


def image_to_video(positive, negative, seed=5):
    """The conditioning the pack's Cosmos3 Image to Video node attaches: the first frame's latent (here random) in
    every frame slot, and a mask marking latent frame 0 as given."""
    import node_helpers

    latent = torch.randn(1, 48, 3, SIZE // 16, SIZE // 16, generator=torch.Generator().manual_seed(seed))
    mask = torch.zeros(1, 1, 3, 1, 1)
    mask[:, :, 0] = 1.0
    values = {"cosmos3_cond_latent": latent, "cosmos3_cond_mask": mask}
    return node_helpers.conditioning_set_values(positive, values), node_helpers.conditioning_set_values(negative, values)


def sample(ns, model, positive, negative, latent, schedule="flow", cfg=4.0, ksampler=False):
    """Final latent of one run through ComfyUI's KSampler or SamplerCustomAdvanced with the pack's scheduler."""
    if ksampler:
        return ns.run_node("KSampler", model=model, seed=4, steps=STEPS, cfg=cfg, sampler_name="euler", scheduler="simple",
                           positive=positive, negative=negative, latent_image=latent, denoise=1.0).outputs[0]["samples"]
    guider = ns.run_node("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg).outputs[0]
    sampler = ns.run_node("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = ns.run_node("RandomNoise", noise_seed=4).outputs[0]
    sigmas = ns.run_node("Cosmos3Scheduler", steps=STEPS, flow_shift=3.0, denoise=1.0, schedule=schedule).outputs[0]
    return ns.run_node("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent).outputs[0]["samples"]


class GeneratorLayerCalls:
    """Counts ``forward_gen`` calls of the pack's decoder layers (the generator pathway)."""

    def __init__(self, layer_cls, monkeypatch):
        self.calls = 0
        original = layer_cls.forward_gen

        @functools.wraps(original)  # keeps the signature SeaCache checks at run start
        def forward_gen(layer, *args, **kwargs):
            self.calls += 1
            return original(layer, *args, **kwargs)

        monkeypatch.setattr(layer_cls, "forward_gen", forward_gen)


CASES = {
    "t2v": {},
    "ksampler": {"ksampler": True},
    "batch2": {"batch": 2},
    "fp8": {"dtype": "fp8_e4m3fn"},
    "int8": {"dtype": "int8"},
    "int4_convrot": {"int4": True},  # a pre-quantized checkpoint: int4 ConvRot MLPs (awq_w4a16 markers)
    "split_reasoner": {"tower": "gen"},
    # 4 steps: the defaults' first and last step always compute, and the distance at steps 1-2 stays above the
    # default threshold, so the defaults reuse nothing there (exact); a threshold of 1 reuses
    "dmd2_4step": {"schedule": "distilled_4step", "cfg": 1.0, "expect_reuse": False},
    "dmd2_4step_threshold1": {"schedule": "distilled_4step", "cfg": 1.0, "apply": {"threshold": 1.0}},
    "i2v": {"i2v": True},
    "audio_video": {"audio": True},
}


def run_case(ns, pack, monkeypatch, model, batch=1, ksampler=False, schedule="flow", cfg=4.0, i2v=False, audio=False, tower="both", apply=None):
    """The checks every case shares; returns (max abs error at defaults (or ``apply``'s settings), calls, ran,
    reused, largest output)."""
    und_tower = ns.run_node("Cosmos3UndTowerLoader", model_dir=pack.root, weight_dtype="default").outputs[0] if tower == "gen" else None
    positive, negative = encode(ns, und_tower)
    if i2v:
        positive, negative = image_to_video(positive, negative)
    if audio:
        positive, negative, latent = ns.run_node("Cosmos3EmptyAVLatentVideo", positive=positive, negative=negative, width=SIZE,
                                                 height=SIZE, length=LENGTH, fps=24.0, batch_size=batch).outputs
    else:
        latent = ns.run_node("Cosmos3EmptyLatentVideo", width=SIZE, height=SIZE, length=LENGTH, batch_size=batch).outputs[0]
    run = lambda m: sample(ns, m, positive, negative, latent, schedule, cfg, ksampler)  # noqa: E731

    plain = run(model)
    assert torch.isfinite(plain).all()
    assert torch.equal(run(seacache(ns, model, threshold=0.0)), plain)
    patched = seacache(ns, model, **(apply or {}))
    counter = GeneratorLayerCalls(pack.model.Cosmos3DecoderLayer, monkeypatch)
    cached = run(patched)
    monkeypatch.undo()
    report = last_report(patched)
    assert report["seam"] == "Cosmos3 decoder-layer stack (community ComfyUI-Cosmos3)" and report["stopped"] is None
    assert report["status"] == "completed" and report["uncached_calls"] == 0
    # every computed call runs each generator layer once per item; a reused call runs none
    assert counter.calls == report["ran"] * batch * community.TINY_CONFIG["num_hidden_layers"]
    assert not model.object_patches and torch.equal(run(model), plain)  # the input MODEL samples as before
    return (cached - plain).abs().max().item(), report["calls"], report["ran"], report["reused"], plain.abs().max().item()


@pytest.mark.parametrize("case", CASES)
def test_real_pack_case(comfy, pack, monkeypatch, case):
    options = dict(CASES[case])
    expect_reuse = options.pop("expect_reuse", True)
    model = pack.load(options.pop("dtype", "default"), options.get("tower", "both"), options.pop("int4", False))
    error, calls, ran, reused, scale = run_case(comfy, pack, monkeypatch, model, **options)
    print(f"\n{case}: max abs error {error:.4g} (output max {scale:.3g}), calls {calls} ran {ran} reused {reused}")
    if expect_reuse:
        assert reused > 0 and 0 < error < 0.25 * scale
    else:
        assert reused == 0 and error == 0


def test_real_pack_under_dynamic_vram(comfy, pack, monkeypatch):
    """The pack's loader builds its patcher from ``CoreModelPatcher``, which main.py rebinds to ModelPatcherDynamic
    with comfy-aimdo: emulated here the way main.py does it."""
    memory_management = pytest.importorskip("comfy.memory_management", reason="this ComfyUI has no dynamic VRAM")
    if not hasattr(comfy.model_patcher, "ModelPatcherDynamic"):
        pytest.skip("this ComfyUI has no ModelPatcherDynamic")
    import comfy_aimdo.control

    assert comfy_aimdo.control.init()
    with monkeypatch.context() as patches:
        patches.setattr(memory_management, "aimdo_enabled", True)
        patches.setattr(comfy.model_patcher, "CoreModelPatcher", comfy.model_patcher.ModelPatcherDynamic)
        model = pack.load()
    # on a CPU load device ModelPatcherDynamic hands back a ModelPatcher; the layers were still built the lazy way
    linear = model.model.diffusion_model.layers[0].mlp_moe_gen.up_proj
    assert getattr(linear, "comfy_need_lazy_init_bias", None) is not None, "the layer was not built lazily"
    with monkeypatch.context() as patches:
        patches.setattr(memory_management, "aimdo_enabled", True)
        error, calls, ran, reused, scale = run_case(comfy, pack, patches, model)
    print(f"\ndynamic_vram: max abs error {error:.4g} (output max {scale:.3g}), calls {calls} ran {ran} reused {reused}")
    assert reused > 0 and 0 < error < 0.25 * scale


def test_unknown_layer_interface_is_refused_before_the_first_step(comfy, pack, monkeypatch):
    """A modified copy of the pack's layer class (a parameter of forward_gen renamed) is refused at Apply, naming
    the pack and the supported commits; the input MODEL is untouched."""
    model = pack.load()
    layer_cls = pack.model.Cosmos3DecoderLayer
    renamed = type("Cosmos3DecoderLayer", (layer_cls,), {"forward_gen": lambda self, hidden, k_und, v_und, cos_gen, sin_gen: layer_cls.forward_gen(self, hidden, k_und, v_und, cos_gen, sin_gen)})
    for layer in model.model.diffusion_model.layers:
        monkeypatch.setattr(layer, "__class__", renamed)
    with pytest.raises(ValueError, match=r"RyukoMatoiFan/ComfyUI-Cosmos3.*b9226bf.*1388a60"):
        seacache(comfy, model)
    assert not model.object_patches


def test_seacache_failure_inside_the_model_falls_back_to_whole_calls(comfy, pack, monkeypatch, caplog):
    """An exception raised by SeaCache's step inside the model (injected into the stack's first leave) stops caching
    for the rest of the run: the video is the pack's own, bit for bit, the report says why, one warning is logged."""
    model = pack.load()
    positive, negative = encode(comfy)
    latent = comfy.run_node("Cosmos3EmptyLatentVideo", width=SIZE, height=SIZE, length=LENGTH, batch_size=1).outputs[0]
    plain = sample(comfy, model, positive, negative, latent)
    patched = seacache(comfy, model)

    def broken_commit(self, verdict, residual):  # SeaCache's step where the stack is left, inside the model
        raise RuntimeError("injected seam failure")

    for name, module in list(sys.modules.items()):
        if name.endswith("seacache_core.run") and hasattr(module, "SeaCacheRun"):
            monkeypatch.setattr(module.SeaCacheRun, "commit", broken_commit)
    with caplog.at_level("WARNING"):
        out = sample(comfy, patched, positive, negative, latent)
    report = last_report(patched)
    assert torch.equal(out, plain) and report["status"] == "completed" and report["reused"] == 0
    # cond and uncond prompts differ in length, so each step makes two model calls, every one of them whole
    assert "RuntimeError: injected seam failure" in report["stopped"] and report["uncached_calls"] == 2 * STEPS
    warnings = [r for r in caplog.records if "SeaCache stopped caching" in r.getMessage()]
    assert len(warnings) == 1
