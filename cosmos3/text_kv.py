"""Per-run cache of the text pathway's per-layer keys/values.

The text (understanding) pathway of Cosmos3 never reads generator tokens, so for a given prompt its keys and
values at every layer are the same on every denoising step. Computing them once per prompt and sampling run
removes the whole text pathway from all later steps. The cache belongs to one run: the host creates it when
sampling starts and clears it when sampling ends, so patched weights (LoRA) can never meet stale entries.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

TEXT_KV_CACHE_KEY = "cosmos3_text_kv_cache"


@dataclass
class TextKV:
    """Keys/values of every layer for a padded batch of prompts, and each prompt's length when they differ."""

    layers: list[tuple[torch.Tensor, torch.Tensor]]
    lengths: list[int] | None  # real prompt lengths; None when no prompt is padded


class TextKVCache:
    """Maps a batch of prompts (token ids, dtype, device) to its :class:`TextKV`; counts hits and misses."""

    def __init__(self):
        self._entries: dict[tuple, TextKV] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(token_ids: torch.Tensor, dtype: torch.dtype, host_ids: tuple[int, ...] | None = None) -> tuple:
        """Cache key of a padded token batch for a compute dtype on its device; ``host_ids`` are the ids already
        read to the host (row-major), else they are read here."""
        if host_ids is None:
            host_ids = tuple(token_ids.detach().to("cpu", torch.int64).flatten().tolist())
        return tuple(token_ids.shape), tuple(host_ids), dtype, str(token_ids.device)

    def get(self, key: tuple) -> TextKV | None:
        """The cached entry or None, counting the look-up."""
        entry = self._entries.get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, key: tuple, entry: TextKV) -> None:
        """Store an entry for the rest of the run."""
        self._entries[key] = entry

    def clear(self) -> None:
        """Free every entry (end of the run)."""
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
