"""Native Cosmos3 (NVIDIA omni world model) for video and image generation, in plain torch.

Layer operations and attention are injected so a host (ComfyUI) can supply its own; nothing here imports the host.
"""

from .checkpoint import is_unused_key, load_weights, read_config, require_cosmos3_keys, shard_files, tensor_shapes
from .config import Cosmos3Config
from .model import STACK_BOUNDARIES, STACK_BOUNDARY_KEY, Cosmos3Transformer, GenStackInputs, patchify, stack_boundary, unpatchify
from .ops import TorchOps, sdpa_attention
from .schedule import reference_sigmas
from .text_kv import TEXT_KV_CACHE_KEY, TextKV, TextKVCache

__all__ = [
    "Cosmos3Config",
    "Cosmos3Transformer",
    "STACK_BOUNDARIES",
    "STACK_BOUNDARY_KEY",
    "GenStackInputs",
    "TEXT_KV_CACHE_KEY",
    "TextKV",
    "TextKVCache",
    "TorchOps",
    "is_unused_key",
    "load_weights",
    "patchify",
    "read_config",
    "reference_sigmas",
    "require_cosmos3_keys",
    "sdpa_attention",
    "shard_files",
    "stack_boundary",
    "tensor_shapes",
    "unpatchify",
]
