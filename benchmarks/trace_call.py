"""How long the path of one gated model call is: every SeaCache function one reused call and one computed call
pass through, traced with ``sys.setprofile`` on the tiny Cosmos3 through ComfyUI's sampler nodes.

    COMFYUI_PATH=/path/to/ComfyUI python -m benchmarks.trace_call [--steps 12] [--list] [--gate "first block"]

A call is one ``BaseModel.apply_model`` (cond and uncond batched, CFG 6, SeaCache Apply's defaults; ``--gate``
another gate at threshold 0.35, as diffusers' first-block recipe). For the first
reused and the first computed call after the warm-up it prints the distinct SeaCache functions (code in
``seacache_core/`` and ``nodes/seacache/``; comprehensions not counted), the files they live in and the deepest
chain of SeaCache frames; ``--list`` names them. The pack's budget for a reused call is about 25 functions in at
most 6 files (issue 29)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEACACHE_DIRS = (str(ROOT / "seacache_core") + os.sep, str(ROOT / "nodes" / "seacache") + os.sep)
NOT_COUNTED = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


class CallTrace:
    """Buckets the SeaCache frames entered inside each ``apply_model`` call (one bucket per model call)."""

    def __init__(self):
        self.calls: list[dict] = []
        self.current: dict | None = None
        self.depth = 0  # SeaCache frames on the stack inside the current call

    def profile(self, frame, event, arg):
        code = frame.f_code
        if code.co_name == "apply_model" and code.co_filename.endswith(os.path.join("comfy", "model_base.py")):
            if event == "call" and self.current is None:
                self.current = {"functions": set(), "deepest": 0, "frame": frame}
            elif event == "return" and self.current is not None and self.current["frame"] is frame:
                self.current.pop("frame")
                self.calls.append(self.current)
                self.current = None
            return
        if self.current is None or not code.co_filename.startswith(SEACACHE_DIRS):
            return
        if event == "call":
            self.depth += 1
            self.current["deepest"] = max(self.current["deepest"], self.depth)
            if code.co_name not in NOT_COUNTED:
                name = getattr(code, "co_qualname", code.co_name)
                self.current["functions"].add((os.path.relpath(code.co_filename, ROOT), name))
        elif event == "return":
            self.depth = max(self.depth - 1, 0)


def describe(kind: str, bucket: dict, listing: bool) -> str:
    files = sorted({path for path, _ in bucket["functions"]})
    lines = [f"{kind} call: {len(bucket['functions'])} distinct SeaCache functions in {len(files)} files, "
             f"{bucket['deepest']} SeaCache frames deep at the deepest"]
    if listing:
        for path in files:
            names = sorted(name for p, name in bucket["functions"] if p == path)
            lines.append(f"  {path}: {', '.join(names)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--list", action="store_true", help="name every function")
    parser.add_argument("--gate", default=None, help="another gate of SeaCache Apply, at threshold 0.35")
    args = parser.parse_args(argv)
    from seacache_testing import comfyui_harness
    from seacache_testing.comfy_runs import load_tiny

    class Folders:
        def mktemp(self, name):
            return Path(tempfile.mkdtemp(prefix=name))

    ns = comfyui_harness.comfy_session(os.environ[comfyui_harness.ENV_VAR], output_root=Path(tempfile.mkdtemp()))
    tiny = load_tiny(ns, Folders())
    if args.gate is None:
        model = tiny.seacache(threshold=0.13, residual_order="auto", gate="sea same-sigma")
    else:
        model = tiny.seacache(threshold=0.35, residual_order="0", max_consecutive=-1, gate=args.gate)
    positive, negative, latent = tiny.encode(), tiny.encode("", negative=True), tiny.empty()
    trace = CallTrace()
    sys.setprofile(trace.profile)
    try:
        tiny.sample(model, positive, negative, latent, steps=args.steps)
    finally:
        sys.setprofile(None)
    records = model.model_options["transformer_options"]["seacache_settings"].last_run["records"]
    if len(records) != len(trace.calls):
        raise SystemExit(f"traced {len(trace.calls)} model calls but the run reports {len(records)}")
    print(f"tiny Cosmos3, {args.steps} steps, CFG 6 batched, gate {args.gate or 'default'}: {len(records)} calls")
    for kind, wanted in (("reused", "reused"), ("computed", "computed")):
        index = next(i for i, r in enumerate(records) if r["decision"] == wanted)
        print(describe(f"{kind} (step {records[index]['step']})", trace.calls[index], args.list))
    return 0


if __name__ == "__main__":
    sys.exit(main())
