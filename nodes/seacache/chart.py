"""Text and Pillow renderings of a SeaCache run report (no ComfyUI imports, so it is testable anywhere)."""

from __future__ import annotations

from PIL import Image, ImageDraw

NOT_APPLIED = ("SeaCache: not applied (no SeaCache Apply on this MODEL: bypassed, removed or not connected); "
               "the latent passed through unchanged.")
COLORS = {"computed": (66, 135, 245), "reused": (46, 204, 113), "forced": (140, 140, 150)}
THRESHOLD_COLOR = (231, 76, 60)


def frontend_report(report: dict | None, note: str | None = None) -> dict:
    """The report the Stats node sends the frontend, with the chart's colors (the one home of them) and the canvas's
    one line (``note``, else :func:`no_reuse_note`)."""
    colors = {**COLORS, "threshold": THRESHOLD_COLOR}
    sent = {**(report or {}), "colors": {name: "#%02x%02x%02x" % rgb for name, rgb in colors.items()}}
    note = note or no_reuse_note(report)
    return sent if note is None else {**sent, "note": note}


def no_reuse_note(report: dict | None) -> str | None:
    """Why a run reused no call, in one line (None if it reused some): the run's reason, or the host's."""
    if not report or report.get("reused"):
        return None
    if not report.get("calls"):
        why = f"no model call reached the seam ({report.get('uncached_calls', 0)} ran whole)"
    elif report.get("stopped"):
        why = f"caching stopped {report['stopped']}"
    else:
        why = report["nothing_reused"]
    return f"SeaCache reused 0 of {report.get('calls', 0)} calls: {why}."


def summary_text(report: dict | None) -> str:
    """The run's status and step count above the gate's summary, then guidance calls, calls that missed the seam, why
    caching stopped, and the seam."""
    if not report:
        return "SeaCache: no run recorded yet (run the sampler with this SeaCache-patched model first)."
    setting = (f"speedup target {report['speedup_target']:g}x" if report.get("speedup_target")
               else f"threshold {report['threshold']}")
    text = f"SeaCache run {report['status']} over {report['steps']} steps ({setting}):\n{report['summary']}"
    if report.get("guidance_calls"):
        followed = report.get("guidance_followed", 0)
        text += (f"\nguidance calls: {report['guidance_calls']} ({followed} followed their step's call, "
                 f"{report.get('guidance_reused', 0)} of them reused; {report['guidance_calls'] - followed} ran plain)")
    if report.get("uncached_calls"):
        text += f"\ncalls that missed the seam (ran whole): {report['uncached_calls']}"
    if report.get("stopped"):
        text += f"\ncaching stopped {report['stopped']}; the rest of the run was computed whole"
    if report.get("seam"):
        text += f"\nresidual boundary: {report['seam']}"
    return text


def render_timeline(report: dict | None, width: int = 960, height: int = 320, note: str | None = None) -> Image.Image:
    """One bar per gated call, its height the accumulated distance over the threshold (dashed at 1); under the
    header, why the run reused nothing (:func:`no_reuse_note`); without records, ``note``."""
    img = Image.new("RGB", (width, height), (24, 24, 28))
    draw = ImageDraw.Draw(img)
    left, right, top, bottom = 48, width - 12, 34, height - 30
    if not report or not report["records"]:
        draw.text((left, height // 2), note or "SeaCache: no run recorded yet", fill=(220, 220, 220))
        return img
    records, threshold = report["records"], report.get("threshold") or 0.0
    setting = f"target {report['speedup_target']:g}x" if report.get("speedup_target") else f"threshold {threshold}"
    draw.text((left, 8), f"reused {report['reused']}/{report['calls']}  ~{report['speedup']:.2f}x  {setting}", fill=(230, 230, 230))
    if no_reuse_note(report):
        draw.text((left, 21), no_reuse_note(report), fill=(230, 230, 230))
    x = left
    for name, color in COLORS.items():
        draw.rectangle((right - 250 + (x - left), 10, right - 242 + (x - left), 18), fill=color)
        draw.text((right - 238 + (x - left), 7), name, fill=(200, 200, 200))
        x += 85
    scale_max = 2.0
    def y_of(value: float) -> float:
        return bottom - (bottom - top) * min(value, scale_max) / scale_max
    draw.line((left, bottom, right, bottom), fill=(120, 120, 120))
    line_y = y_of(1.0)
    for sx in range(left, right, 10):
        draw.line((sx, line_y, min(sx + 5, right), line_y), fill=THRESHOLD_COLOR)
    draw.text((4, line_y - 6), "thr", fill=THRESHOLD_COLOR)
    slot = (right - left) / len(records)
    for i, r in enumerate(records):
        acc = r.get("accumulated")
        rel = (acc / threshold) if (acc is not None and threshold > 0) else 0.0
        x0 = left + i * slot + max(slot * 0.15, 0.5)
        x1 = left + (i + 1) * slot - max(slot * 0.15, 0.5)
        y0 = min(y_of(rel), bottom - 3)
        draw.rectangle((x0, y0, max(x1, x0 + 1), bottom), fill=COLORS[r["decision"]])
        if r.get("step") is not None and (len(records) <= 40 or i % max(len(records) // 20, 1) == 0):
            draw.text((x0, bottom + 6), str(r["step"]), fill=(170, 170, 170))
    return img
