// Shows CachedSearch Calibrate's table on its node (one row per tau, the recommended one highlighted; the
// two-expert node's rows name their expert, then both picks together) and, on Apply Cache, the calibration
// remembered for its setup. Data comes from the nodes' UI payloads and is kept in
// node.properties so it survives a page reload with the saved workflow.
import { app } from "../../../scripts/app.js";
import { showResultsOn, showWhenReused } from "./cachedsearch_reused.js";

const PANEL = "cachedsearch_calibration";
const STORED = "cachedsearch_calibration_output";
const DOM_WIDGET_MARGIN = 10; // the frontend's inset of a DOM widget's element on each side
const ROW_HEIGHT = 18;

const STYLE = `
.cachedsearch-calibration { font: 12px sans-serif; color: var(--fg-color, #ddd); overflow-x: auto; overflow-y: hidden; }
.cachedsearch-calibration table { border-collapse: collapse; width: 100%; }
.cachedsearch-calibration td, .cachedsearch-calibration th { padding: 1px 4px; text-align: right; white-space: nowrap;
  height: ${ROW_HEIGHT - 2}px; }
.cachedsearch-calibration tr.recommended { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-calibration tr.below-target { opacity: 0.6; }
.cachedsearch-calibration .verdict { padding: 4px 0; line-height: 16px; overflow-wrap: anywhere; }`;

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

function renderCalibration(node, output) {
  const result = output?.cachedsearch_calibration?.[0];
  if (!result || !Array.isArray(result.rows) || result.rows.length === 0) return false;
  const table = document.createElement("table");
  const header = document.createElement("tr");
  const experts = result.rows.some((row) => typeof row.expert === "string");
  for (const title of [...(experts ? ["expert"] : []), "tau", "skipped", "calls", "time", "rho", "top-1", "capture", "regret"]) {
    header.append(cell("th", title));
  }
  table.append(header);
  for (const row of result.rows) {
    const line = document.createElement("tr");
    line.className = row.recommended ? "tau recommended" : row.meets_target ? "tau" : "tau below-target";
    line.dataset.tau = row.tau;
    line.dataset.capture = row.capture?.[0] ?? "";
    if (experts) line.append(cell("td", row.expert ?? ""));
    line.append(cell("td", `${row.recommended ? "★ " : ""}${row.tau}`), cell("td", `${Math.round(100 * row.skipped)}%`),
      cell("td", `${row.call_speedup.toFixed(2)}x`), cell("td", `${row.speedup.toFixed(2)}x`), cell("td", measured(row.rho)),
      cell("td", measured(row.top1)), cell("td", measured(row.capture)), cell("td", measured(row.regret, 3)));
    table.append(line);
  }
  const verdict = cell("div", verdictLines(result));
  verdict.className = "verdict";
  // The table scrolls sideways at narrow widths rather than growing taller; the verdict may wrap to two lines.
  show(node, [table, verdict], ROW_HEIGHT * (result.rows.length + 1) + 8 + 2 * 16 + 8);
  return true;
}

function renderCalibrated(node, output) {
  const line = output?.cachedsearch_calibrated?.[0];
  if (typeof line !== "string") return false;
  const text = cell("div", line);
  text.className = "verdict";
  show(node, [text], 2 * 16 + 8);
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
for (const classType of ["CachedSearchCalibrate", "CachedSearchCalibrateExperts"]) showWhenReused(classType, render);

app.registerExtension({
  name: "cachedsearch.calibrate",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureStyle();
    showResultsOn(nodeType, render, [STORED]);
  },
});
