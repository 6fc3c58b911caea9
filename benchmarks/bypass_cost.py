"""What bypassing or deleting SeaCache Apply costs on a running ComfyUI server, against the graph that never had
SeaCache: the T2V example workflow on the tiny Cosmos3 checkpoint (``seacache_testing.server_bypass``), queued as
never / active / bypassed / deleted, ``--repeats`` times in one server. Each repeat samples a new seed; a prompt
with SeaCache active (another threshold each time) sits between the variants that sample alike, so none is served
from ComfyUI's cache (checked). Prints per variant the median execution time (the server's own timestamps), the
server's RSS, its live tensors and the live objects of SeaCache's run classes after the prompt. Times are noisy on
a shared CPU: read the ratios.

  python -m benchmarks.bypass_cost --comfyui /path/to/ComfyUI [--repeats 5 --steps 20]   (ComfyUI's python)
  python -m benchmarks.bypass_cost --smoke
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
from pathlib import Path

from seacache_testing import server_bypass as sb
from seacache_testing.comfyui_server import comfyui_version, retention

SEACACHE_CLASSES = ("SamplingRun", "SeaCacheRun", "Call", "SeaCacheSettings")


def measure(srv, prompt: dict, rows: dict, name: str) -> None:
    entry = sb.run(srv, prompt)
    probe = retention(srv)
    rows.setdefault(name, []).append(dict(
        seconds=sb.wall_seconds(entry), ran=sb.ran_sampler(prompt, entry), rss=probe["rss"] / 2**20,
        tensors=probe["tensors"], seacache=sum(probe["pack_objects"].get(c, 0) for c in SEACACHE_CLASSES),
        models=probe["seacache_models"]))


def run(args) -> dict:
    srv = sb.start_server(Path(args.comfyui), args.python, timeout=args.startup_timeout)
    rows: dict = {}
    object_info = srv.object_info
    try:
        for repeat in range(args.repeats):
            variants = {name: sb.t2v_variants(object_info, seed=repeat, steps=args.steps)[name] for name in sb.VARIANTS}
            for k, name in enumerate(("never", "bypassed", "deleted")):
                active = sb.t2v_variants(object_info, seed=repeat, steps=args.steps, threshold=0.8 + 0.01 * k)["active"]
                measure(srv, active, rows, "active")  # samples something else before each variant
                measure(srv, variants[name], rows, name)
    finally:
        srv.stop()
        shutil.rmtree(srv.base, ignore_errors=True)
    print(f"ComfyUI {comfyui_version(args.comfyui)}: T2V example, tiny Cosmos3, {args.steps} steps, {args.repeats} repeats")
    print("| variant | median s | vs never | sampler ran | RSS MiB (median) | live tensors (median) | SeaCache run objects | MODELs with SeaCache |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    never = statistics.median(r["seconds"] for r in rows["never"])
    for name in sb.VARIANTS:
        got = rows[name]
        seconds = statistics.median(r["seconds"] for r in got)
        print(f"| {name} | {seconds:.2f} | {seconds / never:.2f}x | {sum(r['ran'] for r in got)}/{len(got)} | "
              f"{statistics.median(r['rss'] for r in got):.1f} | {statistics.median(r['tensors'] for r in got):.0f} | "
              f"{max(r['seacache'] for r in got)} | {max(r['models'] for r in got)} |")
    for name in sb.VARIANTS:
        print(f"{name} seconds, in order: " + " ".join(f"{r['seconds']:.2f}" for r in rows[name]))
    return rows


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--comfyui", default=os.environ.get("COMFYUI_PATH"), help="ComfyUI checkout (default $COMFYUI_PATH)")
    p.add_argument("--python", default=sys.executable, help="python with ComfyUI's requirements (default: this one)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--startup-timeout", type=float, default=300.0)
    p.add_argument("--smoke", action="store_true", help="1 repeat of 4 steps (the suite's check that it runs)")
    return p


if __name__ == "__main__":
    arguments = parser().parse_args()
    if not arguments.comfyui:
        sys.exit("give --comfyui or set COMFYUI_PATH")
    if arguments.smoke:
        arguments.repeats, arguments.steps = 1, 4
    run(arguments)
