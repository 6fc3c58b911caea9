"""Session-wide tiny Cosmos3 checkpoint for tests (written once per test session)."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

from make_tiny_checkpoint import make_tiny_checkpoint  # noqa: E402

__all__ = ["make_tiny_checkpoint"]
