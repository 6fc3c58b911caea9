"""Run-scoped values in a guider's transformer options: set for one sampling run, gone when it ends."""

from __future__ import annotations

from contextlib import contextmanager

import comfy.model_patcher


@contextmanager
def run_scoped_option(guider, key: str, value):
    """Give the guider a private copy of its model options holding ``transformer_options[key] = value`` for the
    duration of the block; the original options come back however the block exits (error or interrupt too)."""
    original = guider.model_options
    guider.model_options = comfy.model_patcher.create_model_options_clone(original)
    guider.model_options.setdefault("transformer_options", {})[key] = value
    try:
        yield value
    finally:
        guider.model_options = original
