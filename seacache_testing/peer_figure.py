"""The peer benchmark's figures: error against speed, one curve per method, one panel per cell (proxy, shift, mode),
drawn with Pillow from saved rows (``python -m benchmarks.bench_peers --merge ... --figure F.png``), or one panel per
proxy at the targets (``--pooled-figure``, the README's).

Each point is one run of a method at one setting: its speed in calls (the run's steps over the mean full stack calls
of its pairs) and the geometric-mean error over its pairs, so a curve shows the speeds a method reaches and no
interpolation. The error axis is logarithmic, at most four decades; the speed axis runs from 1x to 5x; dashed lines
mark the targets' speeds. A run outside the axes (an error over four decades below the largest, or a speed past 5x;
an exact run has no place on a log axis) is left out. SeaCache's settings are drawn with thicker lines.
"""

from __future__ import annotations

import math

from PIL import Image, ImageDraw, ImageFont

from seacache_testing.pair_stats import geometric_mean

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#000000", "#9edae5", "#f7b6d2", "#c5b0d5")
MARKERS = ("circle", "square", "triangle", "diamond")
PANEL = (560, 380)
MARGIN = dict(left=64, right=16, top=34, bottom=44)
SPEED_RANGE = (1.0, 5.0)
DECADES = 4  # the error axis spans at most this many decades below the largest error

def curves(rows: list[dict], steps: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per cell and method the (speed in calls, geometric-mean error) of each run, fastest last."""
    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for r in rows:
        if r["method"] == "uncached":
            continue
        error = geometric_mean([m["error"] for m in r["metrics"]])
        if error < 1e-9:
            continue
        speed = steps / (sum(r["full"]) / len(r["full"]))
        out.setdefault(r["cell"], {}).setdefault(r["method"], []).append((speed, error))
    return {cell: {m: sorted(points) for m, points in methods.items()} for cell, methods in out.items()}


def pooled_curves(rows: list[dict], targets, steps: int) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per proxy (its cells pooled: every shift and mode) and method the (target speed, geometric-mean error at the
    target over all the proxy's pairs) of each target the method reaches in every cell (``peer_comparison.pooled``):
    the README's figure, the same numbers as ``peer_comparison.headline``."""
    from seacache_testing.peer_comparison import pooled

    out: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for (proxy, method, target), (errors, _) in pooled(rows, targets).items():
        out.setdefault(f"{proxy}, all shifts and modes", {}).setdefault(method, []).append(
            (steps / target, geometric_mean(errors)))
    return {panel: {m: sorted(points) for m, points in methods.items()} for panel, methods in out.items()}


def _font(size: int):
    try:
        return ImageFont.load_default(size=size)
    except TypeError:  # Pillow without FreeType scaling: the fixed bitmap font
        return ImageFont.load_default()


def _marker(draw: ImageDraw.ImageDraw, kind: str, x: float, y: float, colour: str, r: float = 4.0) -> None:
    if kind == "circle":
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    elif kind == "square":
        draw.rectangle((x - r, y - r, x + r, y + r), fill=colour)
    elif kind == "triangle":
        draw.polygon(((x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)), fill=colour)
    else:
        draw.polygon(((x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)), fill=colour)


def draw(rows: list[dict], labels: dict[str, str], targets, steps: int, columns: int = 2,
         pooled: bool = False) -> Image.Image:
    """The figure of ``rows`` (bench_peers' run rows; ``targets`` in full calls of ``steps``) as an RGB image: a
    panel per cell with a point per run, or with ``pooled`` a panel per proxy with a point per target reached
    (:func:`pooled_curves`)."""
    data = pooled_curves(rows, targets, steps) if pooled else curves(rows, steps)
    methods = list(dict.fromkeys(m for cell in data.values() for m in cell))
    style = {m: (PALETTE[i % len(PALETTE)], MARKERS[i % len(MARKERS)]) for i, m in enumerate(methods)}
    x_high = SPEED_RANGE[1]
    errors = [e for cell in data.values() for points in cell.values() for s, e in points if s <= x_high]
    high = 10 ** math.ceil(math.log10(max(errors))) if errors else 1.0
    low = max(10 ** math.floor(math.log10(min(errors))), high / 10**DECADES) if errors else high / 10**DECADES
    font, small = _font(15), _font(12)
    legend_rows = math.ceil(len(methods) / 2)
    cols = max(1, min(columns, len(data)))
    panel_rows = max(1, math.ceil(len(data) / cols))
    width, height = PANEL[0] * cols, PANEL[1] * panel_rows + 22 * legend_rows + 16
    image = Image.new("RGB", (width, height), "white")
    canvas = ImageDraw.Draw(image)
    for index, (cell, cell_curves) in enumerate(data.items()):
        ox, oy = PANEL[0] * (index % cols), PANEL[1] * (index // cols)
        left, top = ox + MARGIN["left"], oy + MARGIN["top"]
        right, bottom = ox + PANEL[0] - MARGIN["right"], oy + PANEL[1] - MARGIN["bottom"]

        def to_xy(speed: float, error: float) -> tuple[float, float]:
            x = left + (speed - SPEED_RANGE[0]) / (x_high - SPEED_RANGE[0]) * (right - left)
            y = bottom - (math.log10(error) - math.log10(low)) / (math.log10(high) - math.log10(low)) * (bottom - top)
            return x, y

        canvas.text((left, oy + 8), f"{cell}: error (rel. L2, log) against speed", fill="black", font=font)
        for decade in range(round(math.log10(low)), round(math.log10(high)) + 1):
            _, y = to_xy(SPEED_RANGE[0], 10.0 ** decade)
            canvas.line((left, y, right, y), fill="#e4e4e4")
            canvas.text((left - 8, y), f"1e{decade}", fill="black", font=small, anchor="rm")
        for speed in range(int(SPEED_RANGE[0]), int(x_high) + 1):
            x, _ = to_xy(speed, low)
            canvas.line((x, bottom, x, bottom + 4), fill="black")
            canvas.text((x, bottom + 6), f"{speed}x", fill="black", font=small, anchor="mt")
        for target in targets:
            x, _ = to_xy(steps / target, low)
            for y in range(int(top), int(bottom), 8):
                canvas.line((x, y, x, min(y + 4, bottom)), fill="#9a9a9a")
        canvas.rectangle((left, top, right, bottom), outline="black")
        canvas.text(((left + right) / 2, bottom + 22), f"speed in stack calls ({steps} / full calls)", fill="black",
                    font=small, anchor="mt")
        for method, points in cell_curves.items():
            colour, marker = style[method]
            xy = [to_xy(s, e) for s, e in points if SPEED_RANGE[0] <= s <= x_high and low <= e <= high]
            if len(xy) > 1:
                canvas.line(xy, fill=colour, width=3 if method.startswith("seacache") else 2)
            for x, y in xy:
                _marker(canvas, marker, x, y, colour)
    ly = PANEL[1] * panel_rows + 8
    for i, method in enumerate(methods):
        colour, marker = style[method]
        x, y = 16 + (width // 2) * (i % 2), ly + 22 * (i // 2)
        canvas.line((x, y + 8, x + 24, y + 8), fill=colour, width=2)
        _marker(canvas, marker, x + 12, y + 8, colour)
        canvas.text((x + 32, y + 1), labels.get(method, method), fill="black", font=small)
    return image
