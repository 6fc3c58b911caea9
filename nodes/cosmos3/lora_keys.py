"""LoRA key formats a model of this pack accepts besides ComfyUI's generic ones.

ComfyUI builds the map from LoRA key to weight in ``comfy.lora.model_lora_keys_unet`` (used by ``LoraLoader``,
``LoraLoaderModelOnly`` and LoRA hooks), with one branch per core model class and no hook for other models. When
the pack loads, that function is wrapped once: the wrapper calls it unchanged and then adds the aliases a model
offers through its ``lora_key_aliases()`` method (alias -> weight key). Models without the method get exactly the
map ComfyUI built. The Cosmos3 model offers the diffusers/PEFT key formats (:func:`diffusers_lora_aliases`).
"""

from __future__ import annotations

import functools

import comfy.lora

WRAPPED_MARK = "seacache_model_lora_aliases"
"""Attribute set on the wrapper, so loading the pack twice (or two copies of it) never wraps twice."""


def with_model_aliases(build_key_map):
    """``build_key_map`` (ComfyUI's ``model_lora_keys_unet``) extended by the model's own aliases; keys ComfyUI
    already maps keep ComfyUI's target."""

    @functools.wraps(build_key_map)
    def model_lora_keys_unet(model, key_map={}):
        key_map = build_key_map(model, key_map)
        aliases = getattr(model, "lora_key_aliases", None)
        if callable(aliases):
            for alias, weight in aliases().items():
                key_map.setdefault(alias, weight)
        return key_map

    setattr(model_lora_keys_unet, WRAPPED_MARK, True)
    return model_lora_keys_unet


def install_model_lora_aliases() -> None:
    """Wrap ``comfy.lora.model_lora_keys_unet`` (once per process) so models can add their LoRA key formats."""
    if not getattr(comfy.lora.model_lora_keys_unet, WRAPPED_MARK, False):
        comfy.lora.model_lora_keys_unet = with_model_aliases(comfy.lora.model_lora_keys_unet)


LORA_PREFIXES = ("transformer.", "base_model.model.", "")
"""Prefixes of diffusers/PEFT LoRA keys before a weight's module name (see :func:`diffusers_lora_aliases`)."""


def diffusers_lora_aliases(state_dict_keys) -> dict[str, str]:
    """LoRA keys of diffusers/PEFT trainers for each weight of a ComfyUI model's state dict (alias ->
    ``diffusion_model.<name>.weight``): the diffusers Cosmos3 module names equal this pack's model's, so a LoRA
    trained on it names ``transformer.<name>`` (diffusers), ``base_model.model.<name>`` (PEFT) or ``<name>``.
    ComfyUI's own (``diffusion_model.<name>``) and kohya (``lora_unet_<name_with_underscores>``) formats load
    without it."""
    aliases = {}
    for key in state_dict_keys:
        if key.startswith("diffusion_model.") and key.endswith(".weight"):
            name = key[len("diffusion_model.") : -len(".weight")]
            for prefix in LORA_PREFIXES:
                aliases[prefix + name] = key
    return aliases
