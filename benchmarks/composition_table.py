"""The "works with" table: SeaCache Apply chained with ComfyUI's own nodes on a tiny random-weight Wan 2.1, each
case measured against the same graph without SeaCache (cases: ``seacache_testing/composition_cases.py``; the assertions on
them: ``tests/test_comfy_composition.py``). Needs COMFYUI_PATH; about a minute on one CPU thread.

    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.composition_table
"""

from __future__ import annotations

import os
import sys
import tempfile


def main() -> None:
    """Print one Markdown row per case, then SeaCache alone for reference."""
    comfy_path = os.environ.get("COMFYUI_PATH")
    if not comfy_path:
        sys.exit("COMFYUI_PATH is not set: the table is measured through a real ComfyUI checkout.")
    import torch

    torch.set_num_threads(1)
    from seacache_testing import comfyui_harness
    from seacache_testing import composition_cases

    ns = comfyui_harness.comfy_session(comfy_path, output_root=tempfile.mkdtemp(prefix="seacache-composition-"))
    ns.load_extra_nodes("nodes_slg.py", "nodes_context_windows.py", "nodes_easycache.py")
    comfyui_harness.load_pack_with_comfyui_loader(ns)
    rows = [composition_cases.measure(ns, case) for case in composition_cases.CASES]
    print(f"ComfyUI {ns.version}, torch {torch.__version__}")
    print(composition_cases.table(rows))


if __name__ == "__main__":
    main()
