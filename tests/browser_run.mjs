// Drives one workflow through ComfyUI's real frontend in headless Chromium (playwright-core) and prints what it saw
// as one JSON line; tests/test_browser.py starts the server, runs this and asserts on the result.
//
//   node tests/browser_run.mjs CONFIG.json
//
// CONFIG: {url, chromium, workflow (path), overrides: {nodeType: {widget: value}}, statsType, screenshot, timeoutMs,
//          loadOnly (stop after loading the workflow), colors: {name: "#rrggbb"} (the chart's, counted on the canvas)}
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const config = JSON.parse(readFileSync(process.argv[2], "utf8"));
const workflow = JSON.parse(readFileSync(config.workflow, "utf8"));
const result = { console: [], pageErrors: [], failedRequests: [] };
let phase = "startup"; // until the app and the pack's extension are ready; then "load", "run"

const browser = await chromium.launch({ executablePath: config.chromium, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 1000 } });
  page.on("console", (msg) => {
    if (msg.type() === "error" || msg.type() === "warning") result.console.push({ phase, type: msg.type(), text: msg.text(), url: msg.location()?.url ?? "" });
  });
  page.on("pageerror", (err) => result.pageErrors.push({ phase, text: `${err.name}: ${err.message}\n${err.stack ?? ""}` }));
  page.on("requestfailed", (req) => result.failedRequests.push(`${req.url()} ${req.failure()?.errorText ?? ""}`));
  page.on("response", (res) => { if (res.status() >= 400) result.failedRequests.push(`${res.url()} HTTP ${res.status()}`); });

  // Visible dialogs (the missing-nodes dialog of older frontends) and toasts (newer frontends report missing nodes so).
  await page.addInitScript(() => {
    window.seacacheTestNotices = () => [...document.querySelectorAll(".p-dialog, [role=dialog], [role=alert], [role=status], .comfy-modal, .p-toast-message")]
      .filter((d) => d.getClientRects().length > 0 && d.innerText.trim()).map((d) => d.innerText.slice(0, 500));
  });
  await page.goto(config.url, { waitUntil: "load", timeout: config.timeoutMs });
  // The app is ready once its graph exists and the pack's extension has registered (extensions load after the node defs).
  await page.waitForFunction(
    () => window.app?.graph && window.app.canvas && window.app.extensions?.some((e) => e.name === "SeaCache.UI"),
    null, { timeout: config.timeoutMs, polling: 250 });
  result.frontendVersion = await page.evaluate(() => window.__COMFYUI_FRONTEND_VERSION__ ?? null);
  await page.waitForTimeout(1000); // let startup's pending promises settle, so their errors count as startup's
  phase = "load";

  // Load the workflow the way a dropped file is loaded, then look for node types the frontend does not know.
  result.load = await page.evaluate(async ({ workflow, name }) => {
    const app = window.app;
    await app.loadGraphData(structuredClone(workflow), true, true, name);
    await new Promise((r) => setTimeout(r, 3000)); // newer frontends report missing nodes in a toast a moment later
    const registered = window.LiteGraph?.registered_node_types ?? {};
    const nodes = app.graph.nodes.map((n) => ({ id: n.id, type: n.type, registered: n.type in registered, hasErrors: !!n.has_errors,
      widgets: (n.widgets ?? []).map((w) => w.name) }));
    return { nodes, notices: window.seacacheTestNotices(), extensions: app.extensions.map((e) => e.name).filter((n) => /seacache/i.test(n)) };
  }, { workflow, name: config.workflow.split("/").pop() });

  if (config.loadOnly) {
    await page.screenshot({ path: config.screenshot });
    await browser.close();
    console.log(JSON.stringify(result));
    process.exit(0);
  }

  // Set the widgets a tiny CPU run needs, through the graph API (as typing into the widgets would).
  result.overrides = await page.evaluate((overrides) => {
    const applied = [], problems = [];
    for (const [type, widgets] of Object.entries(overrides)) {
      const nodes = window.app.graph.nodes.filter((n) => n.type === type);
      if (!nodes.length) continue;
      for (const node of nodes) {
        for (const [name, value] of Object.entries(widgets)) {
          const widget = node.widgets?.find((w) => w.name === name);
          if (!widget) { problems.push(`${type}.${name}: no such widget`); continue; }
          const choices = widget.options?.values;
          if (Array.isArray(choices) && !choices.includes(value)) { problems.push(`${type}.${name}: ${JSON.stringify(value)} not in ${JSON.stringify(choices)}`); continue; }
          widget.value = value;
          widget.callback?.(value, window.app.canvas, node);
          applied.push(`${type}#${node.id}.${name}=${JSON.stringify(widget.value)}`);
        }
      }
    }
    window.app.graph.setDirtyCanvas(true, true);
    return { applied, problems };
  }, config.overrides);

  // Draws the canvas with the Stats node in view and counts the chart's bar colors inside its timeline band.
  const chartPixels = () => page.evaluate(async ([statsType, hexColors]) => {
    const app = window.app;
    const node = app.graph.nodes.find((n) => n.type === statsType);
    const widget = node?.widgets?.find((w) => w.name === "timeline");
    if (!widget) return { widget: false };
    let seen = null;
    const draw = widget.draw;
    widget.draw = function (ctx, n, width, y, ...rest) {
      seen = { m: ctx.getTransform(), width, y };
      return draw.call(this, ctx, n, width, y, ...rest);
    };
    try {
      app.canvas.ds.scale = 1;
      app.canvas.centerOnNode(node);
      app.canvas.setDirty(true, true);
      app.canvas.draw(true, true);
      await new Promise((r) => requestAnimationFrame(() => r()));
    } finally {
      widget.draw = draw;
    }
    if (!seen) return { widget: true, drawn: false };
    const { m, width, y } = seen;
    // The band's plot area in node coordinates (see paintTimeline in web/seacache.js), mapped to canvas pixels.
    const x0 = Math.ceil(m.a * 10 + m.e), y0 = Math.ceil(m.d * (y + 16) + m.f);
    const x1 = Math.floor(m.a * (width - 10) + m.e), y1 = Math.floor(m.d * (y + 60) + m.f);
    const ctx = app.canvas.canvas.getContext("2d");
    const data = ctx.getImageData(x0, y0, Math.max(x1 - x0, 1), Math.max(y1 - y0, 1)).data;
    const colors = Object.fromEntries(Object.entries(hexColors).map(([k, hex]) => [k, [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16))]));
    const counts = Object.fromEntries(Object.keys(colors).map((k) => [k, 0]));
    for (let i = 0; i < data.length; i += 4) {
      for (const [k, [r, g, b]] of Object.entries(colors)) {
        if (Math.abs(data[i] - r) <= 3 && Math.abs(data[i + 1] - g) <= 3 && Math.abs(data[i + 2] - b) <= 3) counts[k] += 1;
      }
    }
    return { widget: true, drawn: true, rect: [x0, y0, x1, y1], counts, report: node.seacacheReport ?? null };
  }, [config.statsType, config.colors]);

  result.chartBefore = await chartPixels();

  // Queue it as the Queue button does and wait for the server's history to hold the finished prompt.
  const historyKeys = async () => Object.keys(await (await fetch(`${config.url}/history`)).json());
  const before = new Set(await historyKeys());
  phase = "run";
  await page.evaluate(() => window.app.queuePrompt(0, 1));
  const deadline = Date.now() + config.timeoutMs;
  let entry = null;
  while (Date.now() < deadline) {
    const history = await (await fetch(`${config.url}/history`)).json();
    const fresh = Object.entries(history).filter(([id]) => !before.has(id));
    const done = fresh.find(([, h]) => h.status?.completed || h.status?.status_str === "error");
    if (done) { entry = { id: done[0], ...done[1] }; break; }
    await new Promise((r) => setTimeout(r, 500));
  }
  result.history = entry;
  if (entry) {
    // The "executed" websocket message reaches the page a moment after the history entry.
    await page.waitForFunction((t) => window.app.graph.nodes.find((n) => n.type === t)?.seacacheReport, config.statsType, { timeout: 30000, polling: 200 }).catch(() => {});
    result.chartAfter = await chartPixels();
  }
  result.finalNotices = await page.evaluate(() => window.seacacheTestNotices());
  await page.screenshot({ path: config.screenshot });
} finally {
  await browser.close();
}
console.log(JSON.stringify(result));
