// node --test web/  (the ComfyUI glue of seacache.js against stand-ins for /scripts/app.js and /scripts/api.js)
// seacache.js is copied to <tmp>/extensions/seacache/ so that its "../../scripts/app.js" import resolves to
// <tmp>/scripts/app.js, as it resolves to the frontend's shim when ComfyUI serves /extensions/<pack>/seacache.js.
import test from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

const FAKE_APP = `
export const app = {
  extensions: [], nodes: {}, dirty: 0,
  registerExtension(ext) { this.extensions.push(ext); },
  graph: { getNodeById(id) { return id == null ? null : app.nodes[id]; }, setDirtyCanvas() { app.dirty += 1; } },
};`;
const FAKE_API = `
export const api = {
  listeners: {},
  addEventListener(type, fn) { (this.listeners[type] ??= []).push(fn); },
  emit(type, detail) { for (const fn of this.listeners[type] ?? []) fn({ detail }); },
};`;

async function loadInFakeBrowser() {
  const root = mkdtempSync(join(tmpdir(), "seacache-web-"));
  mkdirSync(join(root, "scripts"));
  mkdirSync(join(root, "extensions", "seacache"), { recursive: true });
  writeFileSync(join(root, "package.json"), '{"type": "module"}');
  writeFileSync(join(root, "scripts", "app.js"), FAKE_APP);
  writeFileSync(join(root, "scripts", "api.js"), FAKE_API);
  copyFileSync(join(here, "seacache.js"), join(root, "extensions", "seacache", "seacache.js"));
  globalThis.window = {};
  try {
    const { app } = await import(pathToFileURL(join(root, "scripts", "app.js")).href);
    const { api } = await import(pathToFileURL(join(root, "scripts", "api.js")).href);
    await import(pathToFileURL(join(root, "extensions", "seacache", "seacache.js")).href);
    // Counted right when the import resolves: the frontend registers node definitions then, so the extension must
    // already be registered.
    return { app, api, registeredOnImport: app.extensions.length };
  } finally {
    delete globalThis.window;
  }
}

class FakeNode {
  constructor(id) { this.id = id; this.size = [300, 100]; this.widgets = []; }
  addCustomWidget(w) { this.widgets.push(w); return w; }
  computeSize() { return [300, 40 + this.widgets.reduce((s, w) => s + w.computeSize(300)[1] + 4, 0)]; }
  setSize(size) { this.size = size; }
}

function recordingContext() {
  const calls = [];
  const handler = { get: (t, key) => (key in t ? t[key] : (...args) => calls.push([key, ...args])), set: (t, k, v) => ((t[k] = v), true) };
  return { ctx: new Proxy({ calls }, handler), calls };
}

function defineNodeType(ext, name, base = FakeNode) {
  const nodeType = class extends base {};
  ext.beforeRegisterNodeDef(nodeType, { name });
  return nodeType;
}

test("registers SeaCache.UI and shows the progress line on the SeaCache Apply node", async () => {
  const { app, api, registeredOnImport } = await loadInFakeBrowser();
  assert.equal(registeredOnImport, 1);
  assert.equal(app.extensions.length, 1);
  const ext = app.extensions[0];
  assert.equal(ext.name, "SeaCache.UI");
  ext.setup();
  assert.equal(api.listeners["seacache.progress"].length, 1);

  const Apply = defineNodeType(ext, "SeaCacheApply");
  const node = new Apply(5);
  node.onNodeCreated();
  node.onNodeCreated(); // idempotent: one band only
  assert.deepEqual(node.widgets.map((w) => [w.name, w.serialize, w.options.serialize]), [["progress", false, false]]);
  assert.ok(node.size[1] >= 40 + 22);
  app.nodes["5"] = node;

  api.emit("seacache.progress", { node: "5", reused: 3, calls: 10, step: 4, steps: 6 });
  assert.equal(node.seacacheLine, "SeaCache: reused 3 / 10 calls · step 5/6");
  assert.ok(app.dirty >= 1);
  api.emit("seacache.progress", { node: "99", reused: 1, calls: 1, step: 0, steps: 6 }); // unknown node: ignored
  assert.equal(node.seacacheLine, "SeaCache: reused 3 / 10 calls · step 5/6");

  const { ctx, calls } = recordingContext();
  node.widgets[0].draw(ctx, node, 300, 80, 20);
  assert.deepEqual(calls.find((c) => c[0] === "fillText").slice(1, 2), ["SeaCache: reused 3 / 10 calls · step 5/6"]);

  // Other node types are left alone.
  const Other = defineNodeType(ext, "KSampler");
  assert.equal(Other.prototype.onNodeCreated, undefined);
});

test("SeaCache Stats keeps ui.seacache[0] and draws one bar per record", async () => {
  const { app } = await loadInFakeBrowser();
  const ext = app.extensions[0];
  let previous = 0; // a hook the frontend (or another extension) installed earlier keeps running
  const Stats = defineNodeType(ext, "SeaCacheStats", class extends FakeNode { onExecuted() { previous += 1; } });
  const node = new Stats(11);
  node.onNodeCreated();
  assert.deepEqual(node.widgets.map((w) => w.name), ["timeline"]);
  const report = {
    calls: 3, ran: 2, reused: 1, speedup: 1.5, status: "completed", threshold: 0.25, steps: 3, summary: "",
    records: [
      { step: 0, decision: "forced", accumulated: null },
      { step: 1, decision: "reused", accumulated: 0.1 },
      { step: 2, decision: "computed", accumulated: 0.3 },
    ],
  };
  node.onExecuted({ images: [{ filename: "x.png" }], seacache: [report] });
  assert.equal(node.seacacheReport, report);
  const { ctx, calls } = recordingContext();
  node.widgets[0].draw(ctx, node, 300, 120, 20);
  const rects = calls.filter((c) => c[0] === "fillRect");
  assert.equal(rects.length, 1 + 3); // background + bars
  assert.equal(calls.find((c) => c[0] === "fillText")[1], "SeaCache: reused 1 / 3 calls · ~1.50x");
  assert.ok(calls.some((c) => c[0] === "setLineDash"));
  node.onExecuted({ images: [] }); // no report (e.g. an older server): nothing drawn but the caption
  assert.equal(node.seacacheReport, null);
  assert.equal(previous, 2);
});
