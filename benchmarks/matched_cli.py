"""The command line bench_fp8 and bench_warmup share: their common options, their saved rows, and the ComfyUI
session, proxies, shifts, pairs and steps those options ask for (``--quick``: the natural Cosmos3 proxy, shift 5,
one pair, 10 steps)."""

from __future__ import annotations

import argparse
import json

import torch

from benchmarks import bench_peers
from seacache_testing.peer_comparison import STEPS


def parser(doc: str, shifts: str) -> argparse.ArgumentParser:
    """The shared options; ``shifts`` is ``--shifts``' default."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smoke: 1 pair, 10 steps, the natural Cosmos3 proxy, shift 5")
    p.add_argument("--pairs", type=int, default=10)
    p.add_argument("--first-pair", type=int, default=100, help="first pair number (held-out pairs by default)")
    p.add_argument("--archs", default="cosmos3,wan", help="bench_peers' --archs")
    p.add_argument("--shifts", default=shifts, help="comma-separated shifts")
    p.add_argument("--save", default=None, help="write the rows as JSON")
    p.add_argument("--merge", nargs="+", default=None, metavar="JSON", help="no runs: one table of saved rows")
    return p


def merged(paths: list[str]) -> tuple[list[dict], dict]:
    """The rows of every saved file, and the first file's contents (its steps and settings)."""
    saved = [json.load(open(path)) for path in paths]
    return [r for part in saved for r in part["rows"]], saved[0]


def session(args) -> tuple:
    """``(ns, proxies, shifts, pairs, steps)`` for the shared options, ComfyUI started, denormals flushed."""
    torch.set_flush_denormal(True)
    ns = bench_peers.comfy()
    steps, count = (10, 1) if args.quick else (STEPS, args.pairs)
    archs = bench_peers.proxies(True, ["cosmos3_natural"]) if args.quick else bench_peers.proxies(False, args.archs.split(","))
    shifts = (5.0,) if args.quick else tuple(float(v) for v in args.shifts.split(","))
    return ns, archs, shifts, range(args.first_pair, args.first_pair + count), steps
