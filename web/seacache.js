// SeaCache for Cosmos3: frontend extension.
// Pure helpers (exported, no DOM) + ComfyUI glue that only runs in a browser.
//  - SeaCache Apply: a live line "SeaCache: reused k / n calls · step i/N" from the server's
//    "seacache.progress" event ({node, reused, calls, step (0-based or null), steps}).
//  - SeaCache Stats: the timeline of the run it follows (ui.seacache[0]) as bars, one per gated call.

export const PROGRESS_EVENT = "seacache.progress";
export const EXTENSION_NAME = "SeaCache.UI";
// The colors come with the report (report.colors: one per decision and "threshold", from nodes/seacache/chart.py);
// a bar or line the report gives no color (a report from an older server) is drawn in UNKNOWN_COLOR, white.
export const UNKNOWN_COLOR = "#ffffff";
// Bar heights show accumulated / threshold, capped at SCALE_MAX, so the threshold line sits at 1/SCALE_MAX.
export const SCALE_MAX = 2;
export const MIN_BAR_HEIGHT = 2;
export const PROGRESS_HEIGHT = 22;
export const TIMELINE_HEIGHT = 64;

const isCount = (v) => Number.isFinite(v) && v >= 0;

/** The live line of a progress message; the step part is left out when the step is unknown (null). */
export function formatProgress({ reused, calls, step, steps } = {}) {
  const r = isCount(reused) ? reused : 0;
  const c = isCount(calls) ? calls : 0;
  let line = `SeaCache: reused ${r} / ${c} calls`;
  if (isCount(step) && isCount(steps) && steps > 0) line += ` · step ${Math.min(step + 1, steps)}/${steps}`;
  return line;
}

/** Short caption of a finished run's report: counts, speedup and status; the Stats node's one-line note instead
 *  where the report carries one (SeaCache not applied, or why a run reused nothing). */
export function formatReport(report) {
  if (report && typeof report.note === "string" && report.note) return report.note;
  if (!report || !Array.isArray(report.records) || report.records.length === 0) return "SeaCache: no run recorded yet";
  const speed = Number.isFinite(report.speedup) ? report.speedup : 1;
  const status = report.status && report.status !== "completed" ? ` (${report.status})` : "";
  return `SeaCache: reused ${report.reused} / ${report.calls} calls · ~${speed.toFixed(2)}x${status}`;
}

/** Relative height (0..1) of a record: accumulated / threshold, capped at SCALE_MAX, 0 when unknown. */
export function relativeHeight(accumulated, threshold) {
  if (!Number.isFinite(accumulated) || !Number.isFinite(threshold) || threshold <= 0) return 0;
  return Math.min(Math.max(accumulated / threshold, 0), SCALE_MAX) / SCALE_MAX;
}

/**
 * Drawing layout of a report's timeline in a width x height box (origin top-left):
 * {bars: [{x, y, w, h, color, decision, step}], thresholdY, thresholdColor}. One bar per record, bottom-aligned,
 * in the report's color for its decision; h = max(MIN_BAR_HEIGHT, height * relativeHeight); thresholdY is null
 * without a positive threshold.
 */
export function timelineLayout(report, width, height) {
  const records = report && Array.isArray(report.records) ? report.records : [];
  const threshold = report ? Number(report.threshold) : NaN;
  const thresholdY = Number.isFinite(threshold) && threshold > 0 ? height - height / SCALE_MAX : null;
  const colors = (report && report.colors) || {};
  const thresholdColor = colors.threshold ?? UNKNOWN_COLOR;
  if (records.length === 0 || !(width > 0) || !(height > 0)) return { bars: [], thresholdY, thresholdColor };
  const slot = width / records.length;
  const gap = Math.max(slot * 0.15, 0.5);
  const w = Math.max(slot - 2 * gap, 1);
  const bars = records.map((r, i) => {
    const h = Math.max(MIN_BAR_HEIGHT, height * relativeHeight(r.accumulated, threshold));
    return { x: i * slot + gap, y: height - h, w, h, color: colors[r.decision] ?? UNKNOWN_COLOR, decision: r.decision, step: r.step ?? null };
  });
  return { bars, thresholdY, thresholdColor };
}

// ----------------------------------------------------------------------------- ComfyUI glue (browser only)

/** A fixed-height, non-serialized widget that paints itself: reserves a band in the node's widget layout. */
function bandWidget(name, height, paint) {
  return {
    name, type: `seacache_${name}`, value: "", serialize: false, options: { serialize: false },
    computeSize: (width) => [width ?? 0, height],
    draw(ctx, node, width, y) { paint(ctx, node, width, y, height); },
  };
}

function paintProgress(ctx, node, width, y, height) {
  if (!node.seacacheLine) return;
  ctx.save();
  ctx.fillStyle = "#9fd3ff";
  ctx.font = "12px sans-serif";
  ctx.textBaseline = "middle";
  ctx.fillText(node.seacacheLine, 12, y + height / 2, Math.max(width - 24, 10));
  ctx.restore();
}

function paintTimeline(ctx, node, width, y, height) {
  const report = node.seacacheReport;
  const [left, top, w, h] = [10, y + 16, Math.max(width - 20, 10), height - 20];
  ctx.save();
  ctx.fillStyle = "#ccc";
  ctx.font = "11px sans-serif";
  ctx.textBaseline = "top";
  ctx.fillText(formatReport(report), left, y + 2, w);
  ctx.fillStyle = "rgba(0,0,0,0.25)";
  ctx.fillRect(left, top, w, h);
  const { bars, thresholdY, thresholdColor } = timelineLayout(report, w, h);
  for (const b of bars) {
    ctx.fillStyle = b.color;
    ctx.fillRect(left + b.x, top + b.y, b.w, b.h);
  }
  if (thresholdY !== null && bars.length) {
    ctx.strokeStyle = thresholdColor;
    ctx.setLineDash([4, 3]);
    ctx.beginPath();
    ctx.moveTo(left, top + thresholdY);
    ctx.lineTo(left + w, top + thresholdY);
    ctx.stroke();
  }
  ctx.restore();
}

function chain(proto, hook, fn) {
  const previous = proto[hook];
  proto[hook] = function (...args) {
    const result = previous?.apply(this, args);
    fn.apply(this, args);
    return result;
  };
}

function addBand(node, widget) {
  if (node.widgets?.some((w) => w.name === widget.name)) return;
  node.addCustomWidget(widget);
  const [w, h] = node.computeSize();
  node.setSize([Math.max(node.size[0], w), Math.max(node.size[1], h)]);
}

async function registerComfyExtension() {
  const [{ app }, { api }] = await Promise.all([import("../../scripts/app.js"), import("../../scripts/api.js")]);
  const redraw = () => app.graph?.setDirtyCanvas(true, false);
  app.registerExtension({
    name: EXTENSION_NAME,
    setup() {
      // Registering the listener also tells the api to dispatch this custom message type.
      api.addEventListener(PROGRESS_EVENT, ({ detail }) => {
        const node = detail && app.graph?.getNodeById(detail.node);
        if (!node) return;
        node.seacacheLine = formatProgress(detail);
        redraw();
      });
    },
    beforeRegisterNodeDef(nodeType, nodeData) {
      if (nodeData?.name === "SeaCacheApply") {
        chain(nodeType.prototype, "onNodeCreated", function () {
          addBand(this, bandWidget("progress", PROGRESS_HEIGHT, paintProgress));
        });
      } else if (nodeData?.name === "SeaCacheStats") {
        chain(nodeType.prototype, "onNodeCreated", function () {
          addBand(this, bandWidget("timeline", TIMELINE_HEIGHT, paintTimeline));
        });
        chain(nodeType.prototype, "onExecuted", function (message) {
          this.seacacheReport = message?.seacache?.[0] ?? null;
          redraw();
        });
      }
    },
  });
}

// Top-level await: the frontend awaits each extension module's import and then registers the node definitions, so
// the extension must be registered by the time the module finishes evaluating, or beforeRegisterNodeDef can miss
// the SeaCache nodes (a race seen in the browser test: nodes loaded without their progress/timeline bands).
if (typeof window !== "undefined") {
  try {
    await registerComfyExtension();
  } catch (err) {
    console.error("[SeaCache] frontend extension failed to load:", err);
  }
}
