// node --test web/  (pure helpers of seacache.js; no DOM, no ComfyUI)
import test from "node:test";
import assert from "node:assert/strict";

import {
  MIN_BAR_HEIGHT,
  SCALE_MAX,
  UNKNOWN_COLOR,
  formatProgress,
  formatReport,
  relativeHeight,
  timelineLayout,
} from "./seacache.js";

const record = (step, decision, accumulated) => ({ step, sigma: 1 - step / 10, distance: accumulated, accumulated, decision, reason: null, branches: {} });

// The colors a report carries (the Stats node adds them from nodes/seacache/chart.py); made-up values here, so the
// layout is seen to take them from the report.
const COLORS = { computed: "#000001", reused: "#000002", forced: "#000003", threshold: "#000004" };

const REPORT = {
  colors: COLORS,
  calls: 5, ran: 3, reused: 2, speedup: 5 / 3, status: "completed", threshold: 0.25, steps: 5,
  summary: "SeaCache: 5 calls, 3 ran the stack, 2 reused, estimated stack speedup 1.67x",
  records: [
    record(0, "forced", null), // warmup: no distance evaluated
    record(1, "reused", 0.125), // half the threshold
    record(2, "reused", 0.25), // at the threshold
    record(3, "computed", 1.0), // 4x the threshold: capped at SCALE_MAX
    record(4, "forced", 0.0),
  ],
};

test("formatProgress shows reused/calls and a 1-based step", () => {
  assert.equal(formatProgress({ reused: 7, calls: 20, step: 11, steps: 35 }), "SeaCache: reused 7 / 20 calls · step 12/35");
  assert.equal(formatProgress({ reused: 0, calls: 1, step: 0, steps: 6 }), "SeaCache: reused 0 / 1 calls · step 1/6");
  assert.equal(formatProgress({ reused: 3, calls: 12, step: 5, steps: 6 }), "SeaCache: reused 3 / 12 calls · step 6/6");
});

test("formatProgress leaves out an unknown step and tolerates missing fields", () => {
  assert.equal(formatProgress({ reused: 2, calls: 9, step: null, steps: 35 }), "SeaCache: reused 2 / 9 calls");
  assert.equal(formatProgress({ reused: 2, calls: 9, step: 3, steps: 0 }), "SeaCache: reused 2 / 9 calls");
  assert.equal(formatProgress({}), "SeaCache: reused 0 / 0 calls");
  assert.equal(formatProgress(), "SeaCache: reused 0 / 0 calls");
});

test("formatReport summarises a run", () => {
  assert.equal(formatReport(REPORT), "SeaCache: reused 2 / 5 calls · ~1.67x");
  assert.equal(formatReport({ ...REPORT, status: "failed" }), "SeaCache: reused 2 / 5 calls · ~1.67x (failed)");
  assert.equal(formatReport(null), "SeaCache: no run recorded yet");
  assert.equal(formatReport({}), "SeaCache: no run recorded yet");
  assert.equal(formatReport({ records: [] }), "SeaCache: no run recorded yet");
});

test("formatReport shows the Stats node's note instead of the counts", () => {
  const note = "SeaCache reused 0 of 5 calls: threshold 0 never reuses (raise it to reuse steps).";
  assert.equal(formatReport({ ...REPORT, reused: 0, note }), note);
  assert.equal(formatReport({ note: "SeaCache: not applied" }), "SeaCache: not applied");
  assert.equal(formatReport({ ...REPORT, note: "" }), "SeaCache: reused 2 / 5 calls · ~1.67x");
});

test("relativeHeight is accumulated/threshold over SCALE_MAX, capped, 0 when unknown", () => {
  assert.equal(SCALE_MAX, 2);
  assert.equal(relativeHeight(0.125, 0.25), 0.25);
  assert.equal(relativeHeight(0.25, 0.25), 0.5);
  assert.equal(relativeHeight(0.5, 0.25), 1);
  assert.equal(relativeHeight(10, 0.25), 1);
  assert.equal(relativeHeight(null, 0.25), 0);
  assert.equal(relativeHeight(0.1, 0), 0);
  assert.equal(relativeHeight(-1, 0.25), 0);
});

test("timelineLayout: one bar per record, in the report's colors by decision", () => {
  const { bars, thresholdColor } = timelineLayout(REPORT, 500, 100);
  assert.equal(bars.length, 5);
  assert.deepEqual(bars.map((b) => b.decision), ["forced", "reused", "reused", "computed", "forced"]);
  assert.deepEqual(bars.map((b) => b.color), ["#000003", "#000002", "#000002", "#000001", "#000003"]);
  assert.equal(thresholdColor, "#000004");
  assert.deepEqual(bars.map((b) => b.step), [0, 1, 2, 3, 4]);
});

test("timelineLayout: what the report gives no color is drawn in UNKNOWN_COLOR", () => {
  const { bars, thresholdColor } = timelineLayout({ ...REPORT, colors: { reused: "#000002" } }, 500, 100);
  assert.deepEqual(bars.map((b) => b.color), [UNKNOWN_COLOR, "#000002", "#000002", UNKNOWN_COLOR, UNKNOWN_COLOR]);
  assert.equal(thresholdColor, UNKNOWN_COLOR);
  const bare = timelineLayout({ ...REPORT, colors: undefined }, 500, 100);
  assert.ok(bare.bars.every((b) => b.color === UNKNOWN_COLOR));
});

test("timelineLayout: heights proportional to accumulated/threshold, capped, bottom-aligned", () => {
  const { bars, thresholdY } = timelineLayout(REPORT, 500, 100);
  assert.deepEqual(bars.map((b) => b.h), [MIN_BAR_HEIGHT, 25, 50, 100, MIN_BAR_HEIGHT]);
  for (const b of bars) assert.equal(b.y + b.h, 100);
  assert.equal(thresholdY, 50); // accumulated == threshold reaches the line exactly
  assert.equal(bars[2].y, thresholdY);
});

test("timelineLayout: bars fill equal slots without overlapping", () => {
  const { bars } = timelineLayout(REPORT, 500, 100);
  for (const [i, b] of bars.entries()) {
    assert.ok(Math.abs(b.x - (i * 100 + 15)) < 1e-9, `bar ${i} x=${b.x}`);
    assert.ok(Math.abs(b.w - 70) < 1e-9);
    if (i > 0) assert.ok(bars[i - 1].x + bars[i - 1].w < b.x);
  }
  assert.ok(bars.at(-1).x + bars.at(-1).w <= 500);
  // Many calls in a narrow box: bars stay at least 1 px wide.
  const many = { ...REPORT, records: Array.from({ length: 200 }, (_, i) => record(i, "computed", 0.1)) };
  const narrow = timelineLayout(many, 100, 40).bars;
  assert.equal(narrow.length, 200);
  assert.ok(narrow.every((b) => b.w >= 1 && Math.abs(b.h - 8) < 1e-9));
});

test("timelineLayout: empty or thresholdless reports", () => {
  const none = { bars: [], thresholdColor: UNKNOWN_COLOR };
  assert.deepEqual(timelineLayout(null, 100, 50), { ...none, thresholdY: null });
  assert.deepEqual(timelineLayout({}, 100, 50), { ...none, thresholdY: null });
  assert.deepEqual(timelineLayout({ threshold: 0.25, records: [] }, 100, 50), { ...none, thresholdY: 25 });
  assert.deepEqual(timelineLayout({ colors: COLORS, threshold: 0.25, records: [] }, 100, 50), { bars: [], thresholdY: 25, thresholdColor: "#000004" });
  const exact = timelineLayout({ ...REPORT, threshold: 0 }, 100, 50); // threshold 0 = never reuse
  assert.equal(exact.thresholdY, null);
  assert.ok(exact.bars.every((b) => b.h === MIN_BAR_HEIGHT));
  const unknown = timelineLayout({ colors: COLORS, threshold: 0.25, records: [record(0, "mystery", 0.1)] }, 10, 10);
  assert.equal(unknown.bars[0].color, UNKNOWN_COLOR);
});
