// Shows CachedSearch Calibrate's cost before it runs (asked of the server, which computes it from the very plans
// the node runs: POST /cachedsearch/calibration_cost with the widget values, as they change), its table after a
// run (one row per tau, the recommended one highlighted; the two-expert node's rows name their expert, then both
// picks together; with EasyCache or LazyCache measured, every engine's rows) with a legend of its columns, and, on
// Apply Cache, the calibration remembered for its setup. Results come from the nodes' UI payloads and are kept in
// node.properties so they survive a page reload with the saved workflow.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { showResultsOn, showWhenReused } from "./cachedsearch_reused.js";

const PANEL = "cachedsearch_calibration";
const STORED = "cachedsearch_calibration_output";
const DOM_WIDGET_MARGIN = 10; // the frontend's inset of a DOM widget's element on each side
const ROW_HEIGHT = 18;
const LINE_HEIGHT = 16;
const COST_ROUTE = "/cachedsearch/calibration_cost";
const COST_POLL_MS = 400; // how often a Calibrate node looks whether its widgets or prompt links changed
const CALIBRATORS = ["CachedSearchCalibrate", "CachedSearchCalibrateExperts"];
// The widgets the cost depends on (the server ignores those a node does not have).
const COST_INPUTS = ["prompt", "seeds", "first_seed", "capture_target", "taus", "easycache_thresholds",
  "lazycache_thresholds", "taus_high", "taus_low"];

const STYLE = `
.cachedsearch-calibration { font: 12px sans-serif; color: var(--fg-color, #ddd); overflow-x: auto; overflow-y: hidden; }
.cachedsearch-calibration table { border-collapse: collapse; width: 100%; }
.cachedsearch-calibration td, .cachedsearch-calibration th { padding: 1px 4px; text-align: right; white-space: nowrap;
  height: ${ROW_HEIGHT - 2}px; }
.cachedsearch-calibration tr.recommended { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-calibration tr.below-target { opacity: 0.6; }
.cachedsearch-calibration .verdict, .cachedsearch-calibration .cost { padding: 4px 0; line-height: ${LINE_HEIGHT}px;
  overflow-wrap: anywhere; }
.cachedsearch-calibration .cost.error { color: #e88; }
.cachedsearch-calibration .legend { font-size: 11px; line-height: 14px; opacity: 0.85; white-space: nowrap; }
.cachedsearch-calibration tr.engine-start td { border-top: 1px solid rgba(128, 128, 128, 0.5); }`;

function ensureStyle() {
  if (document.getElementById("cachedsearch-calibration-style")) return;
  const style = document.createElement("style");
  style.id = "cachedsearch-calibration-style";
  style.textContent = STYLE;
  document.head.append(style);
}

function panelOf(node) {
  let widget = node.widgets?.find((w) => w.name === PANEL);
  if (!widget) {
    const element = document.createElement("div");
    element.className = "cachedsearch-calibration";
    const margin = () => widget?.margin ?? DOM_WIDGET_MARGIN;
    widget = node.addDOMWidget(PANEL, "cachedsearch", element, {
      serialize: false,
      hideOnZoom: false,
      getMinHeight: () => (element.neededHeight ?? 0) + 2 * margin(),
    });
  }
  return widget.element;
}

function show(node, children, height) {
  const panel = panelOf(node);
  panel.neededHeight = height;
  panel.replaceChildren(...children);
  const needed = node.computeSize?.();
  if (needed && node.size[1] < needed[1]) node.setSize([node.size[0], needed[1]]);
  node.setDirtyCanvas?.(true, true);
}

// Lines `text` wraps to at `width` pixels in the panel's font (the panel's height is set before it is laid out).
const measuring = document.createElement("canvas").getContext("2d");
function wrappedLines(text, width) {
  measuring.font = "12px sans-serif";
  let lines = 1;
  let used = 0;
  for (const word of text.split(" ")) {
    const wide = measuring.measureText(`${word} `).width;
    if (used > 0 && used + wide > width) {
      lines += 1;
      used = wide;
    } else {
      used += wide;
    }
  }
  return lines;
}

// The panel: the cost line (before and after a run), then the last result's table, verdict and legend.
function refresh(node) {
  const children = [];
  let height = 0;
  const cost = node.cachedsearchCost;
  if (cost) {
    const line = cell("div", cost.text);
    line.className = cost.error ? "cost error" : "cost";
    children.push(line);
    node.cachedsearchCostWidth = node.size[0];
    height += wrappedLines(cost.text, node.size[0] - 2 * DOM_WIDGET_MARGIN - 12) * LINE_HEIGHT + 8;
  }
  if (node.cachedsearchResult) {
    children.push(...node.cachedsearchResult.children);
    height += node.cachedsearchResult.height;
  }
  show(node, children, height);
}

// A linked input's value where the link comes from a node that holds it in a widget (a Primitive, a String
// node); null when it comes from another node's output; undefined when the input is not linked.
function linkedValue(node, name) {
  const slot = node.inputs?.find((input) => input.name === name);
  if (slot?.link == null) return undefined;
  const links = app.graph?.links;
  const link = links?.get?.(slot.link) ?? links?.[slot.link];
  const origin = link ? app.graph.getNodeById(link.origin_id) : null;
  const widget = origin?.widgets?.find((w) => typeof w.value === "string" || typeof w.value === "number");
  return widget ? widget.value : null;
}

function costRequest(node) {
  const inputs = {};
  for (const name of COST_INPUTS) {
    const linked = linkedValue(node, name);
    if (linked === null) return { unknown: name };
    const value = linked ?? node.widgets?.find((w) => w.name === name)?.value;
    if (value !== undefined) inputs[name] = value;
  }
  const clip = node.inputs?.find((input) => input.name === "clip")?.link != null;
  return { node: node.comfyClass ?? node.type, inputs, clip };
}

// Asks the server what the node's calibration will cost when its widgets or links changed since it last asked.
async function updateCost(node) {
  const request = costRequest(node);
  const key = JSON.stringify(request);
  if (key === node.cachedsearchCostKey) {
    if (node.cachedsearchCost && node.size[0] !== node.cachedsearchCostWidth) refresh(node);
    return;
  }
  node.cachedsearchCostKey = key;
  let cost;
  if (request.unknown) {
    cost = { text: `Cost: counted when the run starts (${request.unknown} comes from another node's output).` };
  } else {
    try {
      const response = await api.fetchApi(COST_ROUTE, { method: "POST", headers: { "Content-Type": "application/json" },
        body: key });
      const body = await response.json();
      cost = response.ok ? { text: body.line } : { text: `Cost: not known until this is fixed: ${body.error}`, error: true };
    } catch (error) {
      cost = { text: "Cost: the server did not answer; it is stated when the run starts.", error: true };
    }
  }
  if (key !== node.cachedsearchCostKey) return; // the widgets changed again meanwhile
  node.cachedsearchCost = cost;
  refresh(node);
}

function watchCost(nodeType) {
  const onAdded = nodeType.prototype.onAdded;
  nodeType.prototype.onAdded = function () {
    onAdded?.apply(this, arguments);
    clearInterval(this.cachedsearchCostTimer);
    this.cachedsearchCostTimer = setInterval(() => updateCost(this).catch((error) =>
      console.warn("CachedSearch: could not show the calibration's cost", error)), COST_POLL_MS);
  };
  const onRemoved = nodeType.prototype.onRemoved;
  nodeType.prototype.onRemoved = function () {
    onRemoved?.apply(this, arguments);
    clearInterval(this.cachedsearchCostTimer);
  };
}

function cell(tag, text) {
  const element = document.createElement(tag);
  element.textContent = text;
  return element;
}

// [value] or [value, low, high]; null where undefined (a constant ranking has no rho).
function measured(values, digits = 2) {
  if (!Array.isArray(values) || typeof values[0] !== "number") return "-";
  const value = values[0].toFixed(digits);
  return values.length === 3 && typeof values[1] === "number" ? `${value} [${values[1].toFixed(digits)}, ${values[2].toFixed(digits)}]` : value;
}

// What each figure rests on: the seeds, and the prompts when there are several.
function restsOn(result) {
  return result.prompts > 1 ? `${result.prompts} prompts x ${result.seeds} seeds` : `${result.seeds} seeds`;
}

function verdictLines(result) {
  const target = `${Math.round(100 * result.capture_target)}%`;
  if (result.recommended_tau && typeof result.recommended_tau === "object") {
    const picks = Object.entries(result.recommended_tau).map(([expert, tau]) => `${expert} ${tau > 0 ? tau : "0 (cache off)"}`);
    return `recommended tau: ${picks.join(", ")} (largest with capture ≥ ${target}), ${restsOn(result)}, ${result.steps} steps`;
  }
  return typeof result.recommended_tau === "number" && result.recommended_tau > 0
    ? `recommended tau ${result.recommended_tau} (largest with capture ≥ ${target}), ${restsOn(result)}, ${result.steps} steps`
    : `no tau keeps ${target} capture: tau 0, leave the cache off (${restsOn(result)}, ${result.steps} steps)`;
}

// The columns: title, what it means (the legend's line and the header's hover text).
const COLUMNS = {
  skipped: "skipped: share of transformer calls the cache skipped",
  calls: "calls: speed-up in transformer calls (exact: trust this one)",
  time: "time: speed-up in seconds (noisy on a busy machine)",
  rho: "rho: rank correlation of cached and full scores (1 = same order)",
  "top-1": "top-1: how often the cached drafts pick the full winner",
  capture: "capture: share of best-of-S's gain over a random seed kept",
  regret: "regret: verifier score lost by picking among cached drafts",
};
const OUR_ENGINE = "CachedSearch cache";

function legendLines(result) {
  const lines = Object.values(COLUMNS);
  lines[5] = lines[5].replace("S", String(result.seeds)) + ` (target ${Math.round(100 * result.capture_target)}%)`;
  if (result.intervals) {
    lines.push(`[low, high]: 95% bootstrap interval over the ${result.prompts > 1 ? "prompts" : "seeds"}`);
  }
  lines.push("★ the recommendation; details: the node's page (i)");
  return lines;
}

function fastestLine(result) {
  if (!Array.isArray(result.engine_rows)) return null;
  const fastest = result.fastest;
  return fastest ? `fewest computed calls at the target: ${fastest.engine} ${fastest.threshold}`
    : "no engine keeps the target at any measured threshold";
}

function renderCalibration(node, output) {
  const result = output?.cachedsearch_calibration?.[0];
  if (!result || !Array.isArray(result.rows) || result.rows.length === 0) return false;
  const engines = Array.isArray(result.engine_rows) && result.engine_rows.length > result.rows.length;
  const rows = engines ? result.engine_rows : result.rows;
  const table = document.createElement("table");
  const header = document.createElement("tr");
  const experts = rows.some((row) => typeof row.expert === "string");
  const firstColumns = [...(experts ? ["expert"] : []), ...(engines ? ["engine", "threshold"] : ["tau"])];
  for (const title of [...firstColumns, "skipped", "calls", "time", "rho", "top-1", "capture", "regret"]) {
    const heading = cell("th", title);
    if (COLUMNS[title]) heading.title = COLUMNS[title];
    header.append(heading);
  }
  table.append(header);
  rows.forEach((row, index) => {
    const line = document.createElement("tr");
    const starts = engines && row.engine !== rows[index - 1]?.engine;
    line.className = [row.recommended ? "tau recommended" : row.meets_target ? "tau" : "tau below-target",
      ...(starts && index > 0 ? ["engine-start"] : [])].join(" ");
    line.dataset.tau = row.tau;
    line.dataset.capture = row.capture?.[0] ?? "";
    if (engines) line.dataset.engine = row.engine;
    if (experts) line.append(cell("td", row.expert ?? ""));
    if (engines) line.append(cell("td", starts ? (row.engine === OUR_ENGINE ? "CachedSearch" : row.engine) : ""));
    line.append(cell("td", `${row.recommended ? "★ " : ""}${row.tau}`), cell("td", `${Math.round(100 * row.skipped)}%`),
      cell("td", `${row.call_speedup.toFixed(2)}x`), cell("td", `${row.speedup.toFixed(2)}x`), cell("td", measured(row.rho)),
      cell("td", measured(row.top1)), cell("td", measured(row.capture)), cell("td", measured(row.regret, 3)));
    table.append(line);
  });
  const verdicts = [verdictLines(result), fastestLine(result)].filter(Boolean);
  const verdict = cell("div", verdicts.join(". "));
  verdict.className = "verdict";
  const legend = legendLines(result).map((text) => cell("div", text));
  const legendBox = document.createElement("div");
  legendBox.className = "legend";
  legendBox.append(...legend);
  // The table and legend scroll sideways at narrow widths rather than growing taller; the verdict may wrap.
  node.cachedsearchResult = {
    children: [table, verdict, legendBox],
    height: ROW_HEIGHT * (rows.length + 1) + 8 + (verdicts.length + 1) * LINE_HEIGHT + 8 + 14 * legend.length + 4,
  };
  refresh(node);
  return true;
}

function renderCalibrated(node, output) {
  const line = output?.cachedsearch_calibrated?.[0];
  if (typeof line !== "string") return false;
  const text = cell("div", line);
  text.className = "verdict";
  show(node, [text], Math.max(2, wrappedLines(line, node.size[0] - 2 * DOM_WIDGET_MARGIN - 12)) * LINE_HEIGHT + 8);
  return true;
}

const RENDERERS = {
  CachedSearchCalibrate: renderCalibration,
  CachedSearchCalibrateExperts: renderCalibration,
  CachedSearchApplyCache: renderCalibrated,
};

function render(node, output) {
  const renderer = RENDERERS[node.comfyClass ?? node.type];
  if (!renderer || !output || typeof output !== "object") return;
  try {
    if (renderer(node, output)) node.properties[STORED] = output;
  } catch (error) {
    console.warn("CachedSearch: could not show the calibration", error);
  }
}

// Only the calibration tables: Apply Cache's line depends on the sampler downstream of it (steps, sampler,
// scheduler), which its cached result does not, so a reused one could name another setup's calibration.
for (const classType of CALIBRATORS) showWhenReused(classType, render);

app.registerExtension({
  name: "cachedsearch.calibrate",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureStyle();
    showResultsOn(nodeType, render, [STORED]);
    if (CALIBRATORS.includes(nodeData.name)) watchCost(nodeType);
  },
});
