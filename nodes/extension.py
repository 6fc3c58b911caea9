"""The pack's ComfyUI extension: the list of its V3 nodes."""

from __future__ import annotations

from comfy_api.latest import ComfyExtension, io

from .cosmos3.conditioning import Cosmos3DistilledScheduler, Cosmos3EmptyLatentVideo, Cosmos3ImageToVideo, Cosmos3Scheduler
from .cosmos3.guidance import Cosmos3CFGGuider
from .cosmos3.sound import Cosmos3AddSound, Cosmos3EmptyAVLatent, Cosmos3SoundDecode
from .cosmos3.prompt import Cosmos3PromptEncode, Cosmos3PromptEncodeNegative
from .cosmos3.loader import Cosmos3Loader
from .cosmos3.lora_keys import install_model_lora_aliases
from .seacache.apply import SeaCacheApply
from .seacache.stats_node import SeaCacheStats


class SeaCacheExtension(ComfyExtension):
    """SeaCache Apply/Stats and the native Cosmos3 loader and conditioning nodes."""

    async def get_node_list(self) -> list[type[io.ComfyNode]]:
        install_model_lora_aliases()  # diffusers/PEFT LoRA keys for the native Cosmos3 (nodes/cosmos3/lora_keys.py)
        return [
            Cosmos3Loader,
            Cosmos3PromptEncode,
            Cosmos3PromptEncodeNegative,
            Cosmos3EmptyLatentVideo,
            Cosmos3ImageToVideo,
            Cosmos3EmptyAVLatent,
            Cosmos3AddSound,
            Cosmos3SoundDecode,
            Cosmos3Scheduler,
            Cosmos3DistilledScheduler,
            Cosmos3CFGGuider,
            SeaCacheApply,
            SeaCacheStats,
        ]
