"""Native Cosmos3 (NVIDIA omni world model) for video and image generation, in plain torch.

Layer operations and attention are injected so a host (ComfyUI) can supply its own; nothing here imports the host.
"""

from .checkpoint import (
    DistilledSchedule,
    check_checkpoint,
    expected_tensors,
    is_unused_key,
    load_weights,
    read_config,
    read_distilled_schedule,
    read_negative_prompt,
    require_cosmos3_keys,
    shard_files,
    tensor_shapes,
    tokenizer_folder,
)
from .config import Cosmos3Config
from .model import Cosmos3Transformer, GenStackInputs, activation_bytes, patchify, unpatchify
from .ops import TorchOps, nemotron_norm_class, sdpa_attention
from .presets import FAMILY, guidance_active, reference_settings
from .schedule import reference_sigmas
from .text_kv import TEXT_KV_CACHE_KEY, TextKV, TextKVCache

__all__ = [
    "FAMILY",
    "Cosmos3Config",
    "check_checkpoint",
    "expected_tensors",
    "Cosmos3Transformer",
    "DistilledSchedule",
    "GenStackInputs",
    "TEXT_KV_CACHE_KEY",
    "TextKV",
    "TextKVCache",
    "TorchOps",
    "activation_bytes",
    "guidance_active",
    "is_unused_key",
    "load_weights",
    "nemotron_norm_class",
    "patchify",
    "read_config",
    "read_distilled_schedule",
    "read_negative_prompt",
    "reference_settings",
    "reference_sigmas",
    "require_cosmos3_keys",
    "sdpa_attention",
    "shard_files",
    "tensor_shapes",
    "tokenizer_folder",
    "unpatchify",
]
