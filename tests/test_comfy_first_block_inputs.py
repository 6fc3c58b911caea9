"""The first block's modulated input of ComfyUI's core models, as nodes/seacache/seams/block_views.py computes
it inside a first-block replace patch, equals what the block itself feeds its self-attention's image projection
(captured by a forward pre-hook on that projection), on every call of a short CFG run of each tiny model (needs
COMFYUI_PATH)."""

import pytest
import torch

from seacache_testing import tiny_comfy_models
from seacache_testing.anymodel_runs import sample

PROJECTIONS = {  # model -> the first block's image projection that reads the modulated input
    "wan21_t2v": "self_attn.q",
    "wan21_i2v": "self_attn.q",
    "wan22_ti2v_5b": "self_attn.q",
    "hunyuan_video": "img_attn.qkv",
    "flux": "img_attn.qkv",
    "qwen_image": "attn.to_q",
    "ltxv": "attn1.to_q",
}
FIRST_BLOCKS = {"hunyuan_video": "double_blocks", "flux": "double_blocks", "qwen_image": "transformer_blocks",
                "ltxv": "transformer_blocks"}


@pytest.mark.parametrize("name", sorted(PROJECTIONS))
def test_patch_computes_what_the_first_block_feeds_its_attention(comfy, import_pack_module, name):
    if tiny_comfy_models.missing(name):
        pytest.skip(tiny_comfy_models.missing(name))
    inputs = import_pack_module("nodes.seacache.seams.block_views")
    spec = tiny_comfy_models.SPECS[name]
    model = tiny_comfy_models.build(name)
    diffusion_model = model.model.diffusion_model
    compute = inputs.FAMILIES[(type(diffusion_model).__module__, type(diffusion_model).__name__)].modulated
    block = getattr(diffusion_model, FIRST_BLOCKS.get(name, "blocks"))[0]
    computed, fed = [], []

    def patch(args, extra):
        computed.append(compute(block, args).detach().clone())
        return extra["original_block"](args)

    def keep_input(module, args):
        fed.append(args[0].detach().clone())

    patched = model.clone()
    patched.set_model_patch_replace(patch, "dit", "double_block", 0)
    handle = block.get_submodule(PROJECTIONS[name]).register_forward_pre_hook(keep_input)
    try:
        sample(comfy, patched, spec, steps=3)
    finally:
        handle.remove()
    assert len(computed) == len(fed) >= 3
    for got, want in zip(computed, fed):
        assert got.shape == want.shape and torch.equal(got, want), name
