// Shows CachedSearch Calibrate's cost before it runs (asked of the server, which computes it from the very plans
// the node runs: POST /cachedsearch/calibration_cost with the widget values, as they change), its table after a
// run (one row per tau, the recommended one highlighted; the two-expert node's rows name their expert, then both
// picks together; with EasyCache or LazyCache measured, every engine's rows) with a legend of its columns, and, on
// Apply Cache, the calibration remembered for its setup. Results come from the nodes' UI payloads and are kept in
// node.properties so they survive a page reload with the saved workflow.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import {
  element, ensureStyle, fitNode, onWidgetChange, PANEL_MARGIN, panelElement, wrappedLines,
} from "./cachedsearch_dom.js";
import { showResultsOn } from "./cachedsearch_reused.js";

const PANEL = "cachedsearch_calibration";
const STORED = "cachedsearch_calibration_output";
const ROW_HEIGHT = 18;
const INTERVAL_HEIGHT = 12; // an interval's line under its value
const LINE_HEIGHT = 16;
const FONT = "12px sans-serif";
const COST_ROUTE = "/cachedsearch/calibration_cost";
const CALIBRATORS = ["CachedSearchCalibrate", "CachedSearchCalibrateExperts"];
// The widgets the cost depends on, and those of the node's cache windows (the server refuses a window that leaves
// no step to skip); the server ignores those a node does not have.
const COST_INPUTS = ["prompt", "seeds", "first_seed", "capture_target", "taus", "easycache_thresholds",
  "lazycache_thresholds", "taus_high", "taus_low", "steps", "split_step", "warmup_steps", "cooldown_steps",
  "warmup_steps_high", "cooldown_steps_high", "warmup_steps_low", "cooldown_steps_low"];

const STYLE = `
.cachedsearch-calibration { font: ${FONT}; color: var(--fg-color, #ddd); overflow-x: auto; overflow-y: hidden; }
.cachedsearch-calibration table { border-collapse: collapse; width: 100%; }
.cachedsearch-calibration td, .cachedsearch-calibration th { padding: 1px 4px; text-align: right; white-space: nowrap;
  height: ${ROW_HEIGHT - 2}px; }
.cachedsearch-calibration tr.recommended { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-calibration tr.below-target { opacity: 0.6; }
.cachedsearch-calibration .verdict, .cachedsearch-calibration .cost { padding: 4px 0; line-height: ${LINE_HEIGHT}px;
  overflow-wrap: anywhere; }
.cachedsearch-calibration .cost.error { color: #e88; }
.cachedsearch-calibration .legend { font-size: 11px; line-height: 14px; opacity: 0.85; white-space: nowrap; }
.cachedsearch-calibration tr.engine-start td { border-top: 1px solid rgba(128, 128, 128, 0.5); }
.cachedsearch-calibration .interval { display: block; font-size: 10px; line-height: ${INTERVAL_HEIGHT}px; opacity: 0.8; }`;

function show(node, children, height) {
  const panel = panelElement(node, PANEL, "cachedsearch-calibration", (element) => element.neededHeight ?? 0);
  panel.neededHeight = height;
  panel.replaceChildren(...children);
  fitNode(node);
}

// Lines `text` wraps to in the panel's width (the panel's height is set before it is laid out).
function lines(text, node) {
  return wrappedLines(text, node.size[0] - 2 * PANEL_MARGIN - 12, FONT, 1);
}

// The panel: the cost line (before and after a run), then the last result's table, verdict and legend.
function refresh(node) {
  const children = [];
  let height = 0;
  const cost = node.cachedsearchCost;
  if (cost) {
    children.push(element("div", cost.text, cost.error ? "cost error" : "cost"));
    node.cachedsearchCostWidth = node.size[0];
    height += lines(cost.text, node) * LINE_HEIGHT + 8;
  }
  if (node.cachedsearchResult) {
    children.push(...node.cachedsearchResult.children);
    height += node.cachedsearchResult.height;
  }
  show(node, children, height);
}

// The node an input's link comes from; undefined when the input is not linked. Through the node's own methods:
// frontend 1.58 warns on reading input.link.
function linkOrigin(node, name) {
  const slot = node.findInputSlot(name);
  return slot >= 0 && node.graph && node.isInputConnected(slot) ? node.getInputNode(slot) ?? null : undefined;
}

// A linked input's value where the link comes from a node that holds it in a widget (a Primitive, a String
// node); null when it comes from another node's output; undefined when the input is not linked.
function linkedValue(node, name) {
  const origin = linkOrigin(node, name);
  if (origin === undefined) return undefined;
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
  const clip = linkOrigin(node, "clip") !== undefined;
  return { node: node.comfyClass ?? node.type, inputs, clip };
}

// Asks the server what the node's calibration will cost when its widgets or links changed since it last asked.
async function updateCost(node) {
  const request = costRequest(node);
  const key = JSON.stringify(request);
  if (key === node.cachedsearchCostKey) return;
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

// Asks again once the current change is done (several widgets and links change together on a load).
function costChanged(node) {
  if (node.cachedsearchCostQueued) return;
  node.cachedsearchCostQueued = true;
  setTimeout(() => {
    node.cachedsearchCostQueued = false;
    updateCost(node).catch((error) => console.warn("CachedSearch: could not show the calibration's cost", error));
  });
}

// The cost follows the node's widgets, its links, and the widgets of the nodes its cost inputs are linked from.
function followCostInputs(node) {
  node.cachedsearchCostListener ??= () => costChanged(node);
  for (const name of COST_INPUTS) {
    onWidgetChange(node.widgets?.find((w) => w.name === name), node.cachedsearchCostListener);
    for (const widget of linkOrigin(node, name)?.widgets ?? []) onWidgetChange(widget, node.cachedsearchCostListener);
  }
  costChanged(node);
}

function watchCost(nodeType) {
  for (const hook of ["onAdded", "onConfigure", "onConnectionsChange"]) {
    const original = nodeType.prototype[hook];
    nodeType.prototype[hook] = function () {
      const result = original?.apply(this, arguments);
      followCostInputs(this);
      return result;
    };
  }
  // the cost line wraps anew at another width
  const onResize = nodeType.prototype.onResize;
  nodeType.prototype.onResize = function () {
    onResize?.apply(this, arguments);
    if (this.cachedsearchCost && this.size[0] !== this.cachedsearchCostWidth) refresh(this);
  };
}


// [value] or [value, low, high]; null where undefined (a constant ranking has no rho). A cell: the value, with its
// interval under it in small type, so a table with intervals fits the node's default width.
function measured(values, digits = 2) {
  if (!Array.isArray(values) || typeof values[0] !== "number") return "-";
  const value = values[0].toFixed(digits);
  return values.length === 3 && typeof values[1] === "number" ? `${value} [${values[1].toFixed(digits)}, ${values[2].toFixed(digits)}]` : value;
}

function measuredCell(values, digits = 2) {
  const text = measured(values, digits);
  const split = text.indexOf(" [");
  if (split < 0) return element("td", text);
  const cell = element("td", text.slice(0, split));
  cell.append(" ", element("span", text.slice(split + 1), "interval"));
  return cell;
}

// What each figure rests on: the seeds, and the prompts when there are several; how many rollouts an earlier run
// had saved (reused, not computed again).
function restsOn(result) {
  const reused = typeof result.reused_rollouts === "number" && typeof result.rollouts === "number"
    ? `, ${result.reused_rollouts} of ${result.rollouts} rollouts reused from an earlier run` : "";
  return `${result.prompts > 1 ? `${result.prompts} prompts x ${result.seeds} seeds` : `${result.seeds} seeds`}${reused}`;
}

// The recommendation: of the taus that meet the target, the one that skips most; when there is none, why, as the
// payload's none_skipped says (a payload older than that field gives no reason).
function verdictLines(result) {
  const target = `${Math.round(100 * result.capture_target)}%`;
  const rule = `skips most with capture ≥ ${target}`;
  if (result.recommended_tau && typeof result.recommended_tau === "object") {
    const picks = Object.entries(result.recommended_tau).map(([expert, tau]) => `${expert} ${tau > 0 ? tau : "0 (cache off)"}`);
    return `recommended tau: ${picks.join(", ")} (${rule}), ${restsOn(result)}, ${result.steps} steps`;
  }
  if (typeof result.recommended_tau === "number" && result.recommended_tau > 0) {
    return `recommended tau ${result.recommended_tau} (${rule}), ${restsOn(result)}, ${result.steps} steps`;
  }
  const why = result.none_skipped === true ? "no tau skipped a call (try fewer warmup and cooldown steps, or larger taus)"
    : result.none_skipped === false ? `no tau that skips keeps ${target} capture` : "no tau recommended";
  return `${why}: tau 0, leave the cache off (${restsOn(result)}, ${result.steps} steps)`;
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
// The legend: each column's line, capture's with the seeds it rests on and its target.
function legendLines(result) {
  const capture = `${COLUMNS.capture.replace("best-of-S", `best-of-${result.seeds}`)} ` +
    `(target ${Math.round(100 * result.capture_target)}%)`;
  const lines = Object.entries(COLUMNS).map(([title, line]) => (title === "capture" ? capture : line));
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
  const table = element("table");
  const header = element("tr");
  const experts = rows.some((row) => typeof row.expert === "string");
  const firstColumns = [...(experts ? ["expert"] : []), ...(engines ? ["engine", "threshold"] : ["tau"])];
  for (const title of [...firstColumns, "skipped", "calls", "time", "rho", "top-1", "capture", "regret"]) {
    const heading = element("th", title);
    if (COLUMNS[title]) heading.title = COLUMNS[title];
    header.append(heading);
  }
  table.append(header);
  rows.forEach((row, index) => {
    const line = element("tr");
    const starts = engines && row.engine !== rows[index - 1]?.engine;
    line.className = [row.recommended ? "tau recommended" : row.meets_target ? "tau" : "tau below-target",
      ...(starts && index > 0 ? ["engine-start"] : [])].join(" ");
    line.dataset.tau = row.tau;
    line.dataset.capture = row.capture?.[0] ?? "";
    if (engines) line.dataset.engine = row.engine;
    if (experts) line.append(element("td", row.expert ?? ""));
    if (engines) line.append(element("td", starts ? (row.ours ? "CachedSearch" : row.engine) : ""));
    line.append(element("td", `${row.recommended ? "★ " : ""}${row.tau}`), element("td", `${Math.round(100 * row.skipped)}%`),
      element("td", `${row.call_speedup.toFixed(2)}x`), element("td", `${row.speedup.toFixed(2)}x`), measuredCell(row.rho),
      measuredCell(row.top1), measuredCell(row.capture), measuredCell(row.regret, 3));
    table.append(line);
  });
  const verdicts = [verdictLines(result), fastestLine(result)].filter(Boolean);
  const verdict = element("div", verdicts.join(". "), "verdict");
  const legend = legendLines(result).map((text) => element("div", text));
  const legendBox = element("div", undefined, "legend");
  legendBox.append(...legend);
  // The table and legend scroll sideways at narrow widths rather than growing taller; the verdict may wrap.
  node.cachedsearchResult = {
    children: [table, verdict, legendBox],
    height: ROW_HEIGHT * (rows.length + 1) + (result.intervals ? INTERVAL_HEIGHT * rows.length : 0) + 8 +
      (lines(verdicts.join(". "), node) + 1) * LINE_HEIGHT + 8 + 14 * legend.length + 4,
  };
  refresh(node);
  return true;
}

function renderCalibrated(node, output) {
  const line = output?.cachedsearch_calibrated?.[0];
  if (typeof line !== "string") return false;
  show(node, [element("div", line, "verdict")], Math.max(2, lines(line, node)) * LINE_HEIGHT + 8);
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

app.registerExtension({
  name: "cachedsearch.calibrate",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureStyle("cachedsearch-calibration-style", STYLE);
    // A reused result shows only on the calibrators: Apply Cache's line depends on the sampler downstream of it
    // (steps, sampler, scheduler), which its cached result does not, so a reused one could name another setup's
    // calibration.
    showResultsOn(nodeType, nodeData.name, render, [STORED], CALIBRATORS.includes(nodeData.name));
    if (CALIBRATORS.includes(nodeData.name)) watchCost(nodeType);
  },
});
