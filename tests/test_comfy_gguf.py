"""SeaCache on GGUF models loaded by city96/ComfyUI-GGUF, tested at 795e451 (needs COMFYUI_PATH, the pack in
$ECOSYSTEM_PACKS_PATH or ComfyUI's custom_nodes, and the ``gguf`` package the pack requires; skips naming what it
misses). ComfyUI's tiny Wan 2.1 T2V and Flux are written as GGUF files with Q8_0 or Q4_0 weights
(``seacache_testing/gguf_models.py``), loaded with the pack's ``UnetLoaderGGUF``, with and without a LoRA
(``LoraLoaderModelOnly``; the pack patches it onto the dequantized weights at each forward), and sampled through
ComfyUI's sampler nodes with SeaCache Apply: at threshold 0 bit-identical to the same graph without SeaCache; at the
node's defaults the reused calls skip the quantized block stack, with a bounded error; ComfyUI's memory estimate
counts the residual history in the model's compute dtype, not in the quantized weights' bytes."""

import pytest
import torch

from seacache_testing import ecosystem_packs, gguf_models, tiny_comfy_models
from seacache_testing.anymodel_runs import counting_blocks, last_report, sample, stack_blocks
from seacache_testing.composition_cases import with_defaults

STEPS = 12
LORA_MODULES = {"wan21_t2v": ("blocks.0.self_attn.q", "blocks.1.ffn.0", "blocks.1.cross_attn.o"),
                "flux": ("double_blocks.0.img_attn.qkv", "double_blocks.1.txt_mlp.0", "single_blocks.1.linear1")}
SEAMS = {"wan21_t2v": "block stack (WanModel, 2 blocks)", "flux": "block stack (Flux, 4 blocks)"}
CASES = {  # id -> (model, quantization, LoRA)
    "wan-Q8_0": ("wan21_t2v", "Q8_0", False),
    "wan-Q4_0": ("wan21_t2v", "Q4_0", False),
    "wan-Q4_0-lora": ("wan21_t2v", "Q4_0", True),
    "flux-Q8_0": ("flux", "Q8_0", False),
    "flux-Q4_0-lora": ("flux", "Q4_0", True),
}


@pytest.fixture(scope="module")
def gguf_folders(comfy, pack, tmp_path_factory):
    """The pack loaded; a diffusion_models folder and a loras folder the GGUF files and LoRAs are written into."""
    pytest.importorskip("gguf", reason="the gguf package (ComfyUI-GGUF's requirement, pip install gguf) is missing")
    why = ecosystem_packs.load(comfy, ecosystem_packs.GGUF)
    if why:
        pytest.skip(why)
    models, loras = tmp_path_factory.mktemp("gguf_models"), tmp_path_factory.mktemp("gguf_loras")
    comfy.folder_paths.add_model_folder_path("diffusion_models", str(models))
    comfy.folder_paths.add_model_folder_path("loras", str(loras))
    return {"models": models, "loras": loras, "written": {}, "flux_unreadable": flux_unreadable(comfy.version)}


def flux_unreadable(version: str) -> str | None:
    """Why this ComfyUI cannot build the tiny Flux from its weights (its detection reads another width), or None."""
    from comfy.model_detection import detect_unet_config

    state = tiny_comfy_models.build(gguf_models.FLUX).model.diffusion_model.state_dict()
    width = detect_unet_config(state, "").get("hidden_size")
    return None if width == 128 else f"ComfyUI {version} reads a Flux file's width as {width} whatever the file holds"


def load_gguf(comfy, folders, name: str, quantized: str):
    """The tiny model ``name`` as a GGUF file of ``quantized`` weights (written once), loaded by UnetLoaderGGUF;
    with the count of its tensors per GGML type."""
    if name == "flux" and folders["flux_unreadable"]:
        pytest.skip(folders["flux_unreadable"])
    key = (name, quantized)
    if key not in folders["written"]:
        folders["written"][key] = gguf_models.write_model(name, str(folders["models"]), quantized)
    file_name, counts = folders["written"][key]
    return comfy.run_node("UnetLoaderGGUF", unet_name=file_name).outputs[0], counts


def with_lora(comfy, folders, name: str, model):
    path = folders["loras"] / f"{name}.safetensors"
    if not path.exists():
        gguf_models.write_lora(model, LORA_MODULES[name], str(path))
    return comfy.run_node("LoraLoaderModelOnly", model=model, lora_name=path.name, strength_model=1.0).outputs[0]


def seacache(comfy, model, **inputs):
    """SeaCache Apply with its node defaults except ``inputs``."""
    return with_defaults(comfy, "SeaCacheApply", hidden={"UNIQUE_ID": "7"}, model=model, **inputs)


def quantized_weights(model, quantized: str) -> int:
    return sum(getattr(getattr(p, "tensor_type", None), "name", None) == quantized
               for p in model.model.diffusion_model.parameters())


@pytest.mark.parametrize("case", CASES)
def test_gguf_model_exact_at_zero_and_reusing_at_defaults(comfy, gguf_folders, case):
    name, quantized, lora = CASES[case]
    spec = gguf_models.SPECS[name][0]
    base, counts = load_gguf(comfy, gguf_folders, name, quantized)
    assert type(base).__name__ == "GGUFModelPatcher" and quantized_weights(base, quantized) == counts[quantized] > 20
    model = with_lora(comfy, gguf_folders, name, base) if lora else base
    plain = sample(comfy, model, spec, steps=STEPS)
    assert torch.isfinite(plain).all()
    if lora:  # the LoRA reaches the quantized weights
        assert (plain - sample(comfy, base, spec, steps=STEPS)).abs().max() > 1e-3
    assert torch.equal(sample(comfy, seacache(comfy, model, threshold=0.0), spec, steps=STEPS), plain)

    patched = seacache(comfy, model)
    diffusion_model = model.model.diffusion_model
    with counting_blocks(diffusion_model) as blocks:
        cached = sample(comfy, patched, spec, steps=STEPS)
    report = last_report(patched)
    error = float((cached - plain).norm() / plain.norm())
    print(f"\n{case}: {counts}, node defaults reused {report['reused']} of {report['calls']} calls, relative L2 "
          f"error {error:.4f}")
    assert (report["seam"], report["status"], report["stopped"], report["uncached_calls"]) == (
        SEAMS[name], "completed", None, 0)
    assert blocks["calls"] == report["ran"] * len(stack_blocks(diffusion_model))  # reused calls skip the stack
    assert report["reused"] >= STEPS // 3 and 0 < error < 0.05
    assert torch.equal(sample(comfy, model, spec, steps=STEPS), plain)  # the input MODEL samples as before


def test_memory_estimate_counts_the_history_of_a_quantized_model(comfy, gguf_folders, asked):
    """What ComfyUI frees before sampling a Q4_0 Wan grows by the residual history at its fullest in the model's
    compute dtype (float32 on the CPU): 2 branches (cond, uncond) x 2 residuals (order 1) x 48 tokens x 128 wide x 4
    bytes = 98304, though its block weights are stored in GGML blocks of 18 bytes per 32 weights; nothing with the
    history on the CPU."""
    model, _ = load_gguf(comfy, gguf_folders, "wan21_t2v", "Q4_0")
    weight = model.model.diffusion_model.blocks[0].self_attn.q.weight
    assert weight.tensor_type.name == "Q4_0" and weight.dtype == torch.uint8 and weight.data.numel() == 128 * 128 // 32 * 18
    assert model.model.get_dtype() == torch.float32 and model.model.manual_cast_dtype is None
    spec = gguf_models.SPECS["wan21_t2v"][0]
    sample(comfy, model, spec, steps=1)
    sample(comfy, seacache(comfy, model), spec, steps=1)
    sample(comfy, seacache(comfy, model, residual_storage="cpu"), spec, steps=1)
    assert asked[1] - asked[0] == 2 * 2 * (3 * 4 * 4) * 128 * 4 == 98304
    assert asked[2] == asked[0]
    assert "memory_required" not in vars(model.model)
