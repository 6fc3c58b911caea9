"""Train a quality proxy (``seacache_testing.quality_proxy``): a small model of this pack's Cosmos3 architecture, or
of ComfyUI's Wan 2.1 (``--data wan_natural``, needs ``COMFYUI_PATH``), on latent videos of one data source.

The script trains, checks that samples are data-like (each source's validity report and bar) and writes the
weights (bf16 safetensors) with a JSON card of the seed, command and validity numbers:

    python -m benchmarks.train_proxy --data synthetic --steps 2400 --stop-after 2400 --batch 8 --lr 0.002 --seed 0 --threads 2
    python -m benchmarks.train_proxy --data natural --steps 3000 --stop-after 3000 --batch 12 --lr 0.002 --seed 0 --threads 1
    python -m benchmarks.train_proxy --data av --init benchmarks/proxy_natural --out STAGE1 --steps 3000 --stop-after 3000 --batch 12 --lr 0.001 --seed 0 --threads 1
    python -m benchmarks.train_proxy --data av --init STAGE1 --steps 3000 --stop-after 3000 --batch 12 --lr 0.0005 --seed 1 --threads 1
    # 11 min (idle), 18 min and 14 + 10 min on a busy 2-core CPU; write benchmarks/proxy/, benchmarks/proxy_natural/
    # and benchmarks/proxy_av/
    COMFYUI_PATH=... python -m benchmarks.train_proxy --data wan_natural ...  # see benchmarks/proxy_wan_natural/README.md
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from seacache_testing.quality_proxy import (
    CARD_NAME,
    ROOT,
    SOURCES,
    VALID_BAR,
    VALIDITY,
    ProxyData,
    is_data_like,
    load_proxy,
    save_proxy,
    train,
)


def write_card(model, data: ProxyData, folder: str, steps: int, args) -> dict:
    """Check the validity of ``model`` as stored (bf16 round trip) and write its weights and card to ``folder``."""
    save_proxy(model, folder, {}, data)
    report = VALIDITY[data.name](load_proxy(folder, data=data))
    print("validity:", json.dumps(report))
    check = VALID_BAR[data.name]
    card = {
        "what": "SeaCache quality proxy: " + data.what.format(data=data.name),
        "data": data.name,
        "config": {k: v for k, v in data.config().to_dict().items()},
        "latent_shape": data.latent_shape,
        "seed": args.seed, "steps": steps, "batch": args.batch, "lr": args.lr,
        "command": f"python -m benchmarks.train_proxy --data {data.name} "
                   + (f"--init {os.path.relpath(args.init, ROOT)} " if args.init else "")
                   + f"--steps {args.steps} --stop-after {steps} --batch {args.batch} --lr {args.lr} --seed {args.seed} "
                   f"--threads {args.threads}",
        "cfg": data.cfg, "validity": report, "valid": check(report),
    }
    if data.name == "synthetic":
        card["data_like"] = is_data_like(report)
    save_proxy(model, folder, card, data)
    print("valid" if card["valid"] else "NOT valid", f"({steps} steps) -> {folder}")
    return card


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", choices=sorted(SOURCES), default="synthetic", help="the proxy's data source")
    parser.add_argument("--out", default=None, help="folder for proxy.safetensors and proxy.json (default: the source's)")
    parser.add_argument("--steps", type=int, default=600, help="training steps (the learning-rate schedule spans them)")
    parser.add_argument("--stop-after", type=int, default=None, help="stop after this many steps of the schedule")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--init", default=None, metavar="FOLDER",
                        help="start from the proxy in FOLDER (e.g. benchmarks/proxy_natural for --data av)")
    parser.add_argument("--checkpoint-every", type=int, default=200, help="save the EMA weights every n steps")
    parser.add_argument("--validate-only", type=int, default=None, metavar="STEPS",
                        help="no training: check the weights in --out (trained for STEPS steps) and rewrite the card")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    data = SOURCES[args.data]
    folder = args.out or data.folder
    if args.validate_only is not None:
        write_card(load_proxy(folder, data=data), data, folder, args.validate_only, args)
        return
    checkpoint = lambda model, step: save_proxy(model, folder, {"checkpoint_step": step}, data)  # noqa: E731
    init = None
    if args.init:
        with open(os.path.join(args.init, CARD_NAME)) as f:
            init = load_proxy(args.init, data=SOURCES[json.load(f)["data"]])
    model, steps = train(args.steps, args.batch, args.lr, args.seed, args.stop_after, data=data,
                         checkpoint=checkpoint, checkpoint_every=args.checkpoint_every, init=init)
    write_card(model, data, folder, steps, args)


if __name__ == "__main__":
    main()
