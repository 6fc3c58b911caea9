"""What a step cache does to the sound of an audio-video model, measured on the trained audio-video proxy
(``benchmarks/proxy_av``: a tiny Cosmos3 with ``sound_gen``; not Cosmos3-Nano).

For each prompt/seed pair the proxy samples its video and sound once uncached and once per variant and setting with
the same noise; at the same number of full calls (``steps / 1.8``, interpolated per pair between two settings as in
``bench_quality``) it reports the sound latent's relative L2 error, the decoded waveform's SNR and log-spectral
distance (the proxy's sound latent is an exactly invertible linear map of the waveform, ``proxy_av.decode``), and the
video latent's error. Variants:

- ``video gate``: SeaCache's gate on the video latent only (the behaviour before the joint gate: the sound tokens
  ride in the cached stack residual, the gate never reads them), ``SeaCacheConfig(sound_weight=0)`` with SeaCache
  Apply's Cosmos3 defaults: ``gate="sea_same_sigma"``, residual order 2 (``--gate``, ``--order``);
- ``joint gate``: the same gate reading video and sound, ``SeaCacheConfig(sound_weight=1)``
  (``--sound-weight``): the weighted mean of the video's distance and the relative L1 distance of the sound
  latents filtered along their time axis at the current sigma (``seacache_core.sea_filter.Indicator``);
- ``EasyCache``: ComfyUI core EasyCache's rule re-implemented on the whole model call, not driven through ComfyUI
  (``seacache_testing.proxy_jobs.EasyCacheModel``): the cumulative predicted output change, read from the video
  only, against the threshold inside its default window (15 % to 95 % of the schedule); a skipped call returns its
  input plus the last computed output-minus-input of each stream (order-0 reuse, sound included);
- ``evenly spaced``: a fixed set of evenly spaced steps, the stack residual extrapolated (order 1) in between.

The SEA gates and evenly spaced skipping cache the generator stack through ``seacache_core.SeaCacheRun`` and
extrapolate its residual with the same order; Euler flow sampler, cond and uncond batched in one call.

    python -m benchmarks.bench_sound                 # 24 pairs, 35 steps, shift 5 (the proxy's validity setting)
    python -m benchmarks.bench_sound --quick         # CI-sized smoke run: 2 pairs, 8 steps, fixed settings
"""

from __future__ import annotations

import argparse
import math
import time

import torch

from benchmarks import bench_quality as quality
from seacache_testing import proxy_av as av
from seacache_testing import quality_proxy as proxy
from seacache_testing.pair_stats import bracketed, matched, mean_ci, paired_ratio
from seacache_testing.proxy_jobs import SoundJob

GATES = ("video", "joint", "easycache", "even")
LABELS = {"video": "video gate (sound_weight 0)", "joint": "joint gate (sound_weight 1)", "easycache": "EasyCache rule",
          "even": "evenly spaced"}
QUICK_SETTINGS = {"video": (0.05, 0.3), "joint": (0.05, 0.3), "easycache": (0.05, 0.2)}
METRICS = ("sound", "nsr", "lsd", "video")


def measure(out, reference) -> dict[str, float]:
    """Per pair: the sound latent's and the video's relative L2 errors, the decoded sound's noise-to-signal power
    ratio (SNR = -10 log10 of it) and log-spectral distance (dB), against the uncached sample."""
    (video, sound), (ref_video, ref_sound) = out, reference
    wave, ref_wave = av.decode(sound), av.decode(ref_sound)
    return {
        "sound": float((sound - ref_sound).norm() / ref_sound.norm()),
        "nsr": float(10 ** (-av.snr_db(wave, ref_wave)[0] / 10)),
        "lsd": float(av.log_spectral_distance(wave, ref_wave)[0]),
        "video": float((video - ref_video).norm() / ref_video.norm()),
    }


def sweep(job: SoundJob, name: str, pairs: range, settings: dict, order: int, log=print) -> list[dict]:
    """Every variant at its two settings on ``pairs`` (residual ``order``; EasyCache: its own order 0): rows with
    per-pair full calls and metrics."""
    target = job.steps / quality.SPEEDUP
    rows = []
    for gate in GATES:
        points = (float(math.floor(target)), float(math.floor(target) + 1)) if gate == "even" else settings[gate]
        rows += [dict(section=name, gate=gate, order=order, setting=s, full=[], **{m: [] for m in METRICS})
                 for s in points]
    start = time.time()
    for p in pairs:
        reference = job.sample(p)
        for row in rows:
            full, out = job.run(p, row["gate"], order, row["setting"])
            row["full"].append(full)
            for metric, value in measure(out, reference).items():
                row[metric].append(value)
        log(f"pair {p} done ({time.time() - start:.0f} s)")
    return rows


def at_target(rows: list[dict], steps: int) -> dict[str, dict[str, list[float]]]:
    """Per gate and metric each pair's value at ``steps / 1.8`` full calls (``pair_stats.matched``: log
    interpolation, which for the noise-to-signal ratio is linear in dB)."""
    out: dict[str, dict[str, list[float]]] = {}
    target = {rows[0]["section"]: steps / quality.SPEEDUP}
    for metric in METRICS:
        for (_, gate, _), values in matched([{**r, "error": r[metric]} for r in rows], target).items():
            out.setdefault(gate, {})[metric] = values
    return out


def table(rows: list[dict], steps: int) -> str:
    """The printed comparison: per variant the full calls of its two settings, at the 1.8x point the geometric-mean
    sound latent error [95 % CI], SNR and log-spectral distance (mean +- 95 % half-width), the sound error's
    paired ratio to the video gate's, and the video latent error."""
    values = at_target(rows, steps)
    pairs = len(rows[0]["full"])
    full: dict[str, list[float]] = {}
    for r in rows:
        full.setdefault(r["gate"], []).append(sum(r["full"]) / pairs)
    inside, total = bracketed(rows, {rows[0]["section"]: steps / quality.SPEEDUP})

    def geometric(v):
        g, half = mean_ci([math.log(x) for x in v])
        return f"{math.exp(g):.4f} [{math.exp(g - half):.4f}, {math.exp(g + half):.4f}]"

    lines = [
        f"Sound under caching on the trained audio-video proxy (not Cosmos3-Nano), {rows[0]['section']}, {steps} steps, "
        f"{pairs} prompt/seed pairs, at steps/{quality.SPEEDUP:g} = {steps / quality.SPEEDUP:.1f} full calls "
        f"(interpolated per pair; the two runs bracket it on {inside}/{total} pair runs); errors against the uncached "
        "sample; [95% CI] over pairs; x video gate: paired ratio of the sound error, pairs lower",
        "| variant | full calls of the two runs | sound latent error | SNR dB | log-spectral distance dB | "
        "x video gate (sound) | video latent error |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for gate in GATES:
        v = values[gate]
        snr, snr_half = mean_ci([-10 * math.log10(x) for x in v["nsr"]])
        lsd, lsd_half = mean_ci(v["lsd"])
        if gate == "video":
            versus = "-"
        else:
            g, lo, hi, lower = paired_ratio(v["sound"], values["video"]["sound"])
            versus = f"{g:.2f} [{lo:.2f}, {hi:.2f}] {lower}/{pairs}"
        calls = " / ".join(f"{f:.1f}" for f in full[gate])
        lines.append(f"| {LABELS[gate]} | {calls} | {geometric(v['sound'])} | {snr:.1f} +- {snr_half:.1f} | "
                     f"{lsd:.2f} +- {lsd_half:.2f} | {versus} | {geometric(v['video'])} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="CI-sized run: 2 pairs, 8 steps, fixed settings")
    parser.add_argument("--pairs", type=int, default=None, help="prompt/seed pairs (default 24, quick 2)")
    parser.add_argument("--steps", type=int, default=None, help="sampling steps (default 35, quick 8)")
    parser.add_argument("--shift", type=float, default=5.0)
    parser.add_argument("--sound-weight", type=float, default=1.0, help="the joint gate's SeaCacheConfig.sound_weight")
    parser.add_argument("--gate", default="sea_same_sigma", choices=("sea", "sea_same_sigma"),
                        help="the SEA gates' video distance (default: SeaCache Apply's)")
    parser.add_argument("--order", type=int, default=2, help="residual order of the SEA gates and evenly spaced "
                        "skipping (default: SeaCache Apply's auto on Cosmos3)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    pairs = args.pairs or (2 if args.quick else 24)
    steps = args.steps or (8 if args.quick else 35)
    job = SoundJob(proxy.load_proxy(proxy.AV.folder, data=proxy.AV), proxy.AV, args.shift, steps)
    job.sound_weight, job.gate = args.sound_weight, args.gate
    name = f"av s{args.shift:g}"
    log = (lambda *a: None) if args.quick else (lambda *a: print(*a, flush=True))
    if args.quick:
        settings = QUICK_SETTINGS
    else:
        settings = {}
        for gate in QUICK_SETTINGS:
            settings[gate] = quality.calibrate(job, gate, steps / quality.SPEEDUP, order=args.order)
            log(f"calibrated {gate}: {settings[gate]}")
    rows = sweep(job, name, range(pairs), settings, args.order, log)
    print(table(rows, steps))
    return rows


if __name__ == "__main__":
    main()
