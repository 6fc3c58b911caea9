"""SeaCache against the caches a ComfyUI user could pick instead, at matched speed from 2x to 4x, through ComfyUI.

Each trained proxy (``benchmarks/train_proxy.py``; not Cosmos3-Nano, not Wan 2.1 1.3B) is loaded the way a user
loads its model: the two Cosmos3-architecture proxies written as checkpoint folders and read by this pack's
Cosmos3 Loader, the Wan 2.1 proxy (``seacache_testing/proxy_wan.py``) by ComfyUI's own UNETLoader. Every prompt/seed
pair is sampled through ComfyUI's sampler nodes (SamplerCustomAdvanced, CFGGuider, euler, cond and uncond in one
call) uncached and with each cache (``seacache_testing/peer_comparison.py`` lists them):

- ``SeaCache``: SeaCache Apply at its defaults, the threshold swept; ``gate sea``, the paper's gate; ``no reuse
  cap``, the defaults with ``max_consecutive`` -1; ``speedup``, the defaults asked for each target's speed;
- ``EasyCache`` / ``LazyCache``: ComfyUI's core nodes at their defaults, ``reuse_threshold`` swept;
- ``fixed interval``: a fixed set of evenly spaced steps computed (first and last included), the model's
  output-minus-input reused on the others (order 0, Cache-DiT's fixed-interval mode without TaylorSeer), the
  number of computed steps swept; a benchmark wrapper, as ComfyUI has no node for it;
- on Cosmos3, Spectrum at the generator-stack seam (``seacache_testing/spectrum_stack.py``), w 1 and 0.5;
- the third-party caches installed in ComfyUI's custom_nodes that support the model
  (``seacache_testing/peer_packs.py``; the Spectrum packs, ``seacache_testing/spectrum_packs.py``; Cache-DiT's Wan
  node, ``seacache_testing/cachedit_packs.py``, planned from its schedule).

Speed is matched by full stack calls (block executions per block of the stack, normalised to the uncached run's
calls per step): each pair's error is interpolated (log error linear in full calls; PSNR and SSIM linear) between
the two runs of a method that bracket each target (17.5, 11.7 and 8.75 of 35 calls: 2x, 3x and 4x; ``--targets``),
never extrapolated. A method's settings are calibrated per cell to aim 15 % above and below each target on two
calibration pairs; a method whose calls are known in advance (fixed interval, Spectrum's schedule, SeaCache's
``speedup``) is planned instead; the smoke run (``--quick``) calibrates nothing. Errors are measured against the
same pair uncached: the final latent's relative L2 (in the model's latent space) and, for the natural proxies,
whose PCA latent decodes exactly to RGB, per-frame PSNR and SSIM and the temporal error (relative L2 of frame
differences). LPIPS is not measured: it needs downloaded network weights. Wall time is measured apart (``--timing``,
on an idle machine): runs timed while other processes share the CPU are not comparable.

    COMFYUI_PATH=... python -m benchmarks.bench_peers --save peers.json            # the table (see docs/peers.md)
    COMFYUI_PATH=... python -m benchmarks.bench_peers --shard 0/2 --save a.json &  # split over two processes,
    COMFYUI_PATH=... python -m benchmarks.bench_peers --shard 1/2 --save b.json    # then
    python -m benchmarks.bench_peers --merge a.json b.json --figure F.png          # one table and the figure
    COMFYUI_PATH=... python -m benchmarks.bench_peers --timing --shifts 5 --modes t2v --pairs 3 --settings S.json
    COMFYUI_PATH=... python -m benchmarks.bench_peers --quick                      # smoke: 2 pairs, 10 steps
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from seacache_testing import peer_packs
from seacache_testing import cachedit_packs, proxy_wan, spectrum_packs
from seacache_testing import quality_proxy as proxy
from seacache_testing.pair_stats import geometric_mean
from seacache_testing.peer_comparison import (
    COSMOS3_METHODS,
    DEFAULT_METHOD,
    DEFAULTS,
    MARGIN,
    METHODS,
    MODES,
    STEPS,
    TARGETS,
    WAN_METHODS,
    Method,
    bracketing_settings,
    frontier,
    headline,
    metrics,
    natural_frames,
    pair_of,
    replaced,
    shipped,
    summary,
    table,
    variant,
)

SHIFTS = (3.0, 5.0, 10.0)
PAIRS = 24
CALIBRATION_PAIRS = (1000, 1001)


# ----------------------------------------------------------------------------------------------- ComfyUI
def comfy(path: str | None = None):
    """ComfyUI on the CPU (``COMFYUI_PATH``), with this pack and the core cache nodes registered."""
    from seacache_testing import comfyui_harness

    path = path or os.environ.get(comfyui_harness.ENV_VAR)
    if not path:
        raise SystemExit(f"bench_peers runs through ComfyUI: set {comfyui_harness.ENV_VAR} to a ComfyUI checkout.")
    ns = comfyui_harness.comfy_session(path)
    import comfy.utils

    comfy.utils.PROGRESS_BAR_ENABLED = False
    comfyui_harness.load_extra_nodes(ns, "nodes_easycache.py")
    comfyui_harness.load_pack_with_comfyui_loader(ns)
    return ns


# ----------------------------------------------------------------------------------------------- proxies
@dataclass(frozen=True)
class ProxyPrompt:
    """A proxy's prompt as the Cosmos3 model's conditioning carries it: token ids for any latent size."""

    tokens: tuple[int, ...]

    def token_ids(self, latent_shape) -> torch.Tensor:
        """The prompt's token ids [1, L] (a proxy's prompt does not state the video's size)."""
        return torch.tensor([self.tokens], dtype=torch.long)


@dataclass
class Cosmos3Proxy:
    """A trained Cosmos3-architecture proxy written as a checkpoint folder and loaded by the Cosmos3 Loader."""

    data: proxy.ProxyData
    name: str
    decodes: bool  # its latent is the natural PCA map, which decodes exactly to RGB
    model: object = None
    weight_dtype: str = "default"  # the Cosmos3 Loader's (bench_fp8 loads the proxies with fp8_e4m3fn_fast too)

    def load(self, ns, folder: str) -> None:
        """Write the proxy as a checkpoint folder under ``folder`` and load it with the Cosmos3 Loader."""
        from seacache_testing.make_tiny_checkpoint import make_tiny_checkpoint

        weights = proxy.load_proxy(self.data.folder, data=self.data)
        checkpoint = os.path.join(folder, f"cosmos3-proxy-{self.name}")
        make_tiny_checkpoint(checkpoint, "tiny", transformer_weights=(self.data.config(), weights.state_dict()), shards=1)
        ns.folder_paths.add_model_folder_path("diffusion_models", folder, is_default=True)
        self.model = ns.run_node("SeaCacheCosmos3Loader", checkpoint=os.path.basename(checkpoint),
                                 weight_dtype=self.weight_dtype).outputs[0]

    def conditioning(self, label: int | None):
        """CONDITIONING of class ``label``'s prompt (None: the empty prompt, the CFG negative)."""
        tokens = tuple(self.data.prompt_tokens(label, self.data.latent_shape[1]))
        return [[torch.zeros((1, 1, 1)), {"cosmos3_prompt": ProxyPrompt(tokens), "cosmos3_fps": proxy.FPS}]]

    def model_for(self, ns, shift: float):
        """The MODEL a cell samples: the loaded one (Cosmos3's shift is the scheduler's)."""
        return self.model

    def sigmas(self, ns, model, shift: float, steps: int):
        """The run's SIGMAS: Cosmos3 Scheduler at this shift."""
        return ns.run_node("SeaCacheCosmos3Scheduler", steps=steps, shift=shift, denoise=1.0).outputs[0]

    def inputs(self, ns, pair: int, mode: str):
        """(positive, negative, latent) of a pair: its class's prompt, the empty prompt, and an empty latent or,
        for I2V, a clean first frame of that class (as Cosmos3 Image To Video conditions it)."""
        label, _ = pair_of(self.data, pair)
        positive, negative = self.conditioning(label), self.conditioning(None)
        latent = torch.zeros(1, *self.data.latent_shape)
        if mode == "t2v":
            return positive, negative, {"samples": latent}
        latent[:, :, :1] = first_frame(self.data, pair)
        frame_mask = torch.zeros(1, latent.shape[2])
        frame_mask[:, 0] = 1.0
        values = {"cosmos3_cond_latent": latent.clone(), "cosmos3_cond_mask": frame_mask}
        positive, negative = ([[c, {**extra, **values}] for c, extra in cond] for cond in (positive, negative))
        return positive, negative, {"samples": latent, "noise_mask": (1.0 - frame_mask).reshape(1, 1, -1, 1, 1)}

    def frames(self, latent: torch.Tensor) -> torch.Tensor | None:
        """RGB frames of a final latent where the proxy's latent decodes (the natural one), else None."""
        return natural_frames(latent) if self.decodes else None


@dataclass
class WanProxy:
    """The Wan 2.1 natural proxy (``proxy_wan``), loaded by ComfyUI's UNETLoader; each shift through
    ModelSamplingSD3 before any cache, as a Wan graph sets it."""

    data: proxy.ProxyData
    name: str = "Wan 2.1 natural"
    decodes: bool = True
    model: object = None
    table: torch.Tensor | None = None
    shifted: dict = field(default_factory=dict)
    weight_dtype: str = "default"  # UNETLoader's

    def load(self, ns, folder: str) -> None:
        """Load the proxy and its word table (``folder`` unused: the proxy is read from the repository)."""
        self.model, self.table = proxy_wan.load_model(weight_dtype=self.weight_dtype), proxy_wan.word_table()

    def model_for(self, ns, shift: float):
        """The MODEL a cell samples: the loaded one through ModelSamplingSD3 at this shift (one per shift)."""
        if shift not in self.shifted:
            self.shifted[shift] = ns.run_node("ModelSamplingSD3", model=self.model, shift=shift).outputs[0]
        return self.shifted[shift]

    def sigmas(self, ns, model, shift: float, steps: int):
        """The run's SIGMAS: BasicScheduler "simple" on the shifted model."""
        return ns.run_node("BasicScheduler", model=model, scheduler="simple", steps=steps, denoise=1.0).outputs[0]

    def inputs(self, ns, pair: int, mode: str):
        """(positive, negative, latent); I2V keeps a clean first frame through the latent's noise mask (ComfyUI
        re-noises the known frame to each step's sigma), which a T2V Wan serves without conditioning inputs."""
        label, _ = pair_of(self.data, pair)
        positive, negative = proxy_wan.conditioning(label, self.table), proxy_wan.conditioning(None, self.table)
        latent = torch.zeros(1, *self.data.latent_shape)
        if mode == "t2v":
            return positive, negative, {"samples": proxy_wan.from_model_space(latent)}
        latent[:, :, :1] = first_frame(self.data, pair)
        mask = torch.ones(1, 1, latent.shape[2], 1, 1)
        mask[:, :, 0] = 0.0
        return positive, negative, {"samples": proxy_wan.from_model_space(latent), "noise_mask": mask}

    def frames(self, latent: torch.Tensor) -> torch.Tensor:
        """RGB frames of a final latent (model space)."""
        return natural_frames(latent)


def first_frame(data: proxy.ProxyData, pair: int) -> torch.Tensor:
    """The I2V start frame of a pair: frame 0 of a real clip of the pair's class, [1, C, 1, H, W]."""
    label, seed = pair_of(data, pair)
    video, _ = data.clips(torch.tensor([label]), torch.Generator().manual_seed(seed))
    return video[:, :, :1]


# ----------------------------------------------------------------------------------------------- methods
def third_party_peers(ns) -> list:
    """Every installed third-party cache the peer benchmark knows (``peer_packs``, ``spectrum_packs``,
    ``cachedit_packs``)."""
    return [*spectrum_packs.installed_peers(ns), *cachedit_packs.installed(ns)]


def peer_methods(ns, model) -> list[Method]:
    """The third-party caches installed in this ComfyUI that support ``model``, as methods (a Cache-DiT peer
    planned from its schedule, the others calibrated)."""
    def applier(peer):
        module = cachedit_packs if isinstance(peer, cachedit_packs.IntervalPeer) else spectrum_packs
        return lambda ns, model, value: module.apply(ns, peer, model, value)

    return [Method(peer.name.lower().replace(" ", "_"), f"{peer.name} ({peer.source})", peer.knob,
                   tuple(v for v in peer.grid if v > 0), applier(peer), planned=getattr(peer, "planned", None))
            for peer in third_party_peers(ns) if peer_packs.supports(peer, model)]


def peers_line(ns, cells) -> str:
    """Which third-party caches are installed and which ran on which proxy (the benchmark says so)."""
    found = third_party_peers(ns)
    if not found:
        known = (*peer_packs.PEER_CACHES, *spectrum_packs.SPECTRUM_PEERS, *cachedit_packs.CACHEDIT_PEERS)
        looked_for = dict.fromkeys(peer.name for peer in known)
        return f"third-party caches installed in custom_nodes: none ({', '.join(looked_for)} looked for)"
    archs = {cell.arch.name: cell.model for cell in cells}
    ran = {peer.name: [name for name, model in archs.items() if peer_packs.supports(peer, model)] for peer in found}
    return "third-party caches installed: " + "; ".join(
        f"{name} ran on {', '.join(names)}" if names else f"{name} supports none of these proxies" for name, names in ran.items())


# ----------------------------------------------------------------------------------------------- running
@contextmanager
def stack_runs(diffusion_model):
    """Yields a function giving the full stack runs so far: a Cosmos3 model's generator-layer steps
    (``comfy_runs.LayerCalls``) or a core model's block calls (``anymodel_runs.counting_blocks``), per block."""
    from seacache_testing.anymodel_runs import counting_blocks, stack_blocks
    from seacache_testing.comfy_runs import LayerCalls

    if hasattr(diffusion_model, "layers"):
        calls = LayerCalls(diffusion_model)
        try:
            yield lambda: calls.gen // len(calls.layers)
        finally:
            calls.close()
        return
    with counting_blocks(diffusion_model) as counter:
        yield lambda: counter["calls"] // len(stack_blocks(diffusion_model))


def sample(ns, arch, model, pair: int, mode: str, shift: float, steps: int, cfg: float) -> tuple[int, torch.Tensor]:
    """(stack runs, final latent in the model's space) of one pair through SamplerCustomAdvanced."""
    positive, negative, latent = arch.inputs(ns, pair, mode)
    _, seed = pair_of(arch.data, pair)
    run = ns.run_node
    guider = run("CFGGuider", model=model, positive=positive, negative=negative, cfg=cfg).outputs[0]
    sampler = run("KSamplerSelect", sampler_name="euler").outputs[0]
    noise = run("RandomNoise", noise_seed=seed).outputs[0]
    sigmas = arch.sigmas(ns, model, shift, steps)
    with stack_runs(model.model.diffusion_model) as runs:
        out = run("SamplerCustomAdvanced", noise=noise, guider=guider, sampler=sampler, sigmas=sigmas, latent_image=latent)
        full = runs()
    return full, model.model.process_latent_in(out.outputs[0]["samples"]).float()


@dataclass
class Cell:
    """One proxy at one shift and mode."""

    arch: object
    shift: float
    mode: str
    model: object = None  # the MODEL sampled (the proxy's, with this shift where the model carries it)

    @property
    def name(self) -> str:
        return f"{self.arch.name}, shift {self.shift:g}, {self.mode.upper()}"


def calls_per_step(ns, cell: Cell, steps: int, pairs=CALIBRATION_PAIRS) -> dict[int, float]:
    """Per calibration pair the uncached run's stack executions per step (what a method's count is divided by)."""
    return {p: sample(ns, cell.arch, cell.model, p, cell.mode, cell.shift, steps, cell.arch.data.cfg)[0] / steps for p in pairs}


def calibrate(ns, cell: Cell, method: Method, steps: int, base: dict[int, float], targets) -> tuple[float, ...]:
    """The settings of a calibrated method for ``cell`` that bracket ``targets`` (full calls of ``steps``): its broad
    grid is run on the calibration pairs (``base``'s keys, not the measured ones; ``base``: :func:`calls_per_step`)
    until a setting computes fewer mean full calls than the lowest aim, and :func:`bracketing_settings` reads the
    settings off that curve (log-interpolated between grid neighbours; the grid's first value where even that computes
    fewer, the first value of the fewest calls where no setting computes as few)."""
    arch, pairs = cell.arch, list(base)
    lowest = min(targets) * (1 - MARGIN)
    curve = []
    for setting in method.settings:
        model = method.apply(ns, cell.model, setting)
        full = sum(sample(ns, arch, model, p, cell.mode, cell.shift, steps, arch.data.cfg)[0] / base[p] for p in pairs) / len(pairs)
        curve.append((setting, full))
        if full <= lowest:
            break
    return bracketing_settings(curve, targets)


def settings_for(ns, cells, methods, steps: int, targets, path: str | None, quick: bool = False,
                 log=print) -> dict[str, dict[str, list[float]]]:
    """Per cell and method (``methods(cell)``) the settings measured for ``targets`` (full calls of ``steps``): a
    planned method's own (``Method.planned``), in a smoke run (``quick``) every method's ``quick_settings`` with no
    calibration run; else read from ``path`` when it holds them for these targets (shards share one calibration),
    or calibrated and written there."""
    known = {"targets": list(targets)}
    if path and os.path.isfile(path) and not quick:
        with open(path) as f:
            known = json.load(f)
        if known.get("targets") != list(targets):
            raise SystemExit(f"{path} holds settings calibrated for targets {known.get('targets')}, not {list(targets)}")
    for cell in cells:
        base = None
        for method in methods(cell):
            chosen = known.setdefault(cell.name, {})
            if quick:
                chosen[method.name] = list(method.quick_settings(steps, targets))
                continue
            if method.planned is not None:
                chosen[method.name] = list(method.planned(steps, targets))
                continue
            if method.name in chosen:
                continue
            base = base or calls_per_step(ns, cell, steps)
            chosen[method.name] = list(calibrate(ns, cell, method, steps, base, targets))
            log(f"calibrated {cell.name}, {method.name} ({method.knob}): {chosen[method.name]}")
            if path:
                with open(path, "w") as f:
                    json.dump(known, f, indent=1)
    return known


def measure(ns, cell: Cell, methods, pairs, steps: int, settings: dict, log=print) -> list[dict]:
    """Every method at each of its ``settings`` (method name -> settings; SeaCache's defaults also at the shipped
    threshold) on ``pairs`` of ``cell``: one row per (method, setting) with per-pair full calls (normalised to
    ``steps`` for the uncached run) and metrics; the uncached row first."""
    arch, cfg = cell.arch, cell.arch.data.cfg
    references, rows = {}, [dict(cell=cell.name, method="uncached", setting=0.0, pairs=[], full=[], metrics=[])]
    calls_per_step = {}
    for p in pairs:
        runs, x = sample(ns, arch, cell.model, p, cell.mode, cell.shift, steps, cfg)
        references[p], calls_per_step[p] = x, runs / steps
        rows[0]["pairs"].append(p)
        rows[0]["full"].append(float(steps))
        rows[0]["metrics"].append({})
    for method in methods:
        chosen = list(settings[method.name])
        if method.name == DEFAULT_METHOD and DEFAULTS.threshold not in chosen:  # SeaCache Apply as shipped, too
            chosen.append(DEFAULTS.threshold)
        for setting in chosen:
            model = method.apply(ns, cell.model, setting)
            row = dict(cell=cell.name, method=method.name, setting=setting, pairs=[], full=[], metrics=[])
            for p in pairs:
                runs, x = sample(ns, arch, model, p, cell.mode, cell.shift, steps, cfg)
                row["pairs"].append(p)
                row["full"].append(runs / calls_per_step[p])
                row["metrics"].append(metrics(x, references[p], arch, cell.mode))
            rows.append(row)
            log(f"{cell.name}: {method.name} {setting:g}: full {sum(row['full']) / len(pairs):.1f}, "
                f"error {geometric_mean([m['error'] for m in row['metrics']]):.4f}")
    return rows


def timing(ns, cell: Cell, methods, settings: dict, pairs, steps: int, repeats: int = 2) -> str:
    """Wall time of each method at its middle setting (near the middle target) against uncached on
    ``pairs``: every pair run uncached and with each method in turn, ``repeats`` times, after one warm-up; per
    method the median seconds per run, the mean full calls and the two speedups (calls and wall time). On a proxy
    this small ComfyUI's per-step work is a large part of a call, so the wall speedup stays below the calls'."""
    arch, cfg = cell.arch, cell.arch.data.cfg
    chosen = [(m, list(settings[m.name])) for m in methods]
    models = [("uncached", cell.model)] + [(m.name, m.apply(ns, cell.model, grid[len(grid) // 2])) for m, grid in chosen]
    seconds = {name: [] for name, _ in models}
    full = {name: [] for name, _ in models}
    for p in pairs:
        for repeat in range(repeats + 1):
            for name, model in models:
                start = time.perf_counter()
                runs, _ = sample(ns, arch, model, p, cell.mode, cell.shift, steps, cfg)
                if repeat:  # the first round warms up
                    seconds[name].append(time.perf_counter() - start)
                    full[name].append(runs)
    base = sorted(seconds["uncached"])[len(seconds["uncached"]) // 2]
    per_step = sum(full["uncached"]) / len(full["uncached"]) / steps
    lines = [f"{cell.name}: median wall time per run, uncached {base * 1000:.0f} ms",
             "| cache | full calls of 35 | calls speedup | wall-time speedup |", "| --- | ---: | ---: | ---: |"]
    for name, _ in models[1:]:
        calls = sum(full[name]) / len(full[name]) / per_step
        median = sorted(seconds[name])[len(seconds[name]) // 2]
        lines.append(f"| {name} | {calls * STEPS / steps:.1f} | {steps / calls:.2f}x | {base / median:.2f}x |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- main
ARCHS = ("cosmos3", "wan")
PROXY_NAMES = ("cosmos3_natural", "cosmos3_synthetic", "wan")


def proxies(quick: bool, archs=ARCHS) -> list:
    """The proxies compared: ``cosmos3`` the two Cosmos3-architecture proxies (``--quick``: the natural one), or one of
    them by name (``cosmos3_natural``, ``cosmos3_synthetic``), and ``wan`` the Wan 2.1 one."""
    unknown = set(archs) - set(ARCHS) - set(PROXY_NAMES)
    if unknown:
        raise SystemExit(f"unknown --archs {sorted(unknown)}: pick from {', '.join(ARCHS + PROXY_NAMES[:2])}")
    found = []
    if "cosmos3" in archs or "cosmos3_natural" in archs:
        found.append(Cosmos3Proxy(proxy.NATURAL, "Cosmos3 natural", True))
    if ("cosmos3" in archs and not quick) or "cosmos3_synthetic" in archs:
        found.append(Cosmos3Proxy(proxy.SYNTHETIC, "Cosmos3 synthetic", False))
    if "wan" in archs:
        found.append(WanProxy(proxy.WAN_NATURAL))
    return found


def cells_of(archs, shifts=SHIFTS, modes=MODES) -> list[Cell]:
    """Every (proxy, shift, mode) cell, proxy by proxy."""
    return [Cell(arch, shift, mode) for arch in archs for shift in shifts for mode in modes]


def report(rows: list[dict], labels: dict[str, str], targets, steps: int, figure: str | None,
           pooled_figure: str | None = None) -> None:
    """Print the tables of ``rows`` (per cell and target, the frontier at a glance, the summary at each target,
    SeaCache as a user sets it, the README's table per proxy and the same per cell) and draw the figures to
    ``figure`` (a panel per cell) and ``pooled_figure`` (a panel per proxy) when given."""
    print(table(rows, labels, targets, steps))
    print(frontier(rows, labels, targets, steps))
    for target in targets:
        print(summary(rows, labels, target, steps))
    print(shipped(rows, steps))
    print(headline(rows, labels, targets, steps))
    print(headline(rows, labels, targets, steps, per_cell=True))
    from seacache_testing.peer_figure import draw

    for path, pooled in ((figure, False), (pooled_figure, True)):
        if path:
            draw(rows, labels, targets, steps, pooled=pooled).save(path)
            print(f"figure: {path}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 pairs, 10 steps, shift 5, T2V, the natural proxies, no calibration")
    parser.add_argument("--pairs", type=int, default=PAIRS)
    parser.add_argument("--first-pair", type=int, default=0, help="first pair number (a held-out set starts elsewhere)")
    parser.add_argument("--shard", default=None, metavar="K/N", help="run every N-th cell from the K-th")
    parser.add_argument("--save", default=None, help="write the rows as JSON")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON", help="no runs: one table of saved rows")
    parser.add_argument("--figure", default=None, metavar="PNG", help="also draw error against speed, one curve per method")
    parser.add_argument("--pooled-figure", default=None, metavar="PNG",
                        help="also draw the error at each target, a panel per proxy over its shifts and modes (the README's)")
    parser.add_argument("--methods", default=None, help="comma-separated method names (default: all)")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:input=value,...",
                        help="also a SeaCache Apply variant, e.g. start15:start_percent=0.15 (repeatable)")
    parser.add_argument("--timing", action="store_true",
                        help="wall time instead of errors: each method at its middle setting against uncached, "
                             "runs interleaved, on an otherwise idle machine")
    parser.add_argument("--targets", default=None,
                        help="comma-separated full calls of 35 each method is matched at (default: 17.5, 11.7, 8.75: "
                             "2x, 3x, 4x)")
    parser.add_argument("--shifts", default=",".join(f"{v:g}" for v in SHIFTS), help="comma-separated shifts")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated modes (t2v, i2v)")
    parser.add_argument("--archs", default=",".join(ARCHS),
                        help=f"comma-separated proxies: cosmos3 (both), cosmos3_natural, cosmos3_synthetic, wan "
                             f"(default: {','.join(ARCHS)})")
    parser.add_argument("--settings", default=None, metavar="JSON",
                        help="the calibrated settings per cell and method: read when present, else calibrated and written")
    args = parser.parse_args(argv)
    if args.merge:
        saved = [json.load(open(path)) for path in args.merge]
        labels = {}
        for part in saved:
            labels.update(part.get("labels", {}))
        labels.update({m.name: m.label for m in (*METHODS, *WAN_METHODS, *COSMOS3_METHODS)})  # today's names win
        rows = replaced([part["rows"] for part in saved])
        report(rows, labels, tuple(saved[0]["targets"]), saved[0]["steps"], args.figure, args.pooled_figure)
        return
    torch.set_flush_denormal(True)
    ns = comfy()
    peer_packs.load_peer_packs(ns)
    steps, pairs = (10, 2) if args.quick else (STEPS, args.pairs)
    targets = tuple(t * steps / STEPS for t in (map(float, args.targets.split(",")) if args.targets else TARGETS))
    archs = proxies(args.quick, args.archs.split(","))
    shifts = (5.0,) if args.quick else tuple(float(v) for v in args.shifts.split(","))
    cells = cells_of(archs, shifts, ("t2v",) if args.quick else tuple(args.modes.split(",")))
    if args.shard:
        k, n = (int(v) for v in args.shard.split("/"))
        cells = cells[k::n]
    folder = tempfile.mkdtemp(prefix="bench_peers_")
    for arch in {id(c.arch): c.arch for c in cells}.values():
        arch.load(ns, folder)
    for cell in cells:
        cell.model = cell.arch.model_for(ns, cell.shift)

    def methods(cell: Cell) -> list[Method]:
        own = WAN_METHODS if isinstance(cell.arch, WanProxy) else COSMOS3_METHODS
        found = [*METHODS, *own, *peer_methods(ns, cell.model), *map(variant, args.variant)]
        return [m for m in found if args.methods is None or m.name in args.methods.split(",")]

    print(peers_line(ns, cells))
    grids = settings_for(ns, cells, methods, steps, targets, args.settings, quick=args.quick)
    if args.timing:
        for cell in cells:
            print(timing(ns, cell, methods(cell), grids[cell.name], range(args.first_pair, args.first_pair + pairs), steps))
        return
    rows, start = [], time.time()
    for cell in cells:
        rows += measure(ns, cell, methods(cell), range(args.first_pair, args.first_pair + pairs), steps, grids[cell.name])
        print(f"{cell.name} done ({time.time() - start:.0f} s)", flush=True)
    print(f"ComfyUI {ns.version}, torch {torch.__version__}, {torch.get_num_threads()} threads; {pairs} pairs, {steps} steps")
    labels = {m.name: m.label for cell in cells for m in methods(cell)}
    report(rows, labels, targets, steps, args.figure, args.pooled_figure)
    if args.save:
        with open(args.save, "w") as f:
            json.dump({"rows": rows, "labels": labels, "targets": targets, "steps": steps}, f)


if __name__ == "__main__":
    main()
