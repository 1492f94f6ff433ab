// Shows a search's results on its nodes: the ranked drafts on the Verifier, a draft summary on the
// samplers, the delivered seed and cost on Recommit. Data comes from the nodes' UI payloads and is
// kept in node.properties so it survives a page reload with the saved workflow.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";

const PANEL = "cachedsearch_results";
const SUMMARY_FONT = "12px sans-serif";
const SUMMARY_LINE_HEIGHT = 16;
const STORED = "cachedsearch_last_output";
const RENDERERS = {
  CachedSearchVerifier: renderRanking,
  CachedSearchSampler: renderDrafts,
  CachedSearchSamplerAdvanced: renderDrafts,
  CachedSearchSamplerExperts: renderDrafts,
  CachedSearchRecommit: renderDelivery,
  CachedSearchVideoVerifier: renderRanking,
  CachedSearchCombineScores: renderRanking,
};

const STYLE = `
.cachedsearch-panel { font: 12px sans-serif; color: var(--fg-color, #ddd); overflow: auto; }
.cachedsearch-summary { font: ${SUMMARY_FONT}; line-height: ${SUMMARY_LINE_HEIGHT}px; padding: 4px 0; overflow-wrap: anywhere; }
.cachedsearch-panel table { border-collapse: collapse; width: 100%; }
.cachedsearch-panel td, .cachedsearch-panel th { padding: 2px 4px; text-align: right; }
.cachedsearch-panel tr.candidate { cursor: pointer; }
.cachedsearch-panel tr.winner { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-panel tr.pruned { opacity: 0.45; font-style: italic; }
.cachedsearch-panel img { height: 36px; display: block; }
.cachedsearch-overlay { position: fixed; inset: 0; background: rgba(0, 0, 0, 0.8); display: flex;
  flex-direction: column; align-items: center; justify-content: center; z-index: 10000; color: #eee; }
.cachedsearch-overlay img { width: min(90vw, 140vh); max-height: 80vh; object-fit: contain; image-rendering: pixelated; }`;

function ensureStyle() {
  if (document.getElementById("cachedsearch-style")) return;
  const style = document.createElement("style");
  style.id = "cachedsearch-style";
  style.textContent = STYLE;
  document.head.append(style);
}

let measuring;

function textWidth(text) {
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = SUMMARY_FONT;
  return measuring.measureText(text).width;
}

// A summary wraps at the panel's width: it needs a line of height per wrapped line (a fixed height clipped the
// second line under the node's preview image at the default width). Returns the content's height.
function summaryHeight(text, panelWidth, element) {
  // The laid-out panel's width when known, else the width the frontend will give it; 5 % slack for fonts.
  const laidOut = element?.clientWidth > 0 ? element.clientWidth : Infinity;
  const usable = 0.95 * Math.max(60, Math.min(laidOut, panelWidth));
  const space = textWidth(" ");
  let lines = 1;
  let line = 0;
  for (const word of text.split(" ")) {
    const width = textWidth(word);
    if (line > 0 && line + space + width > usable) {
      lines += 1;
      line = width;
    } else {
      line += (line > 0 ? space : 0) + width;
    }
  }
  return 8 + SUMMARY_LINE_HEIGHT * lines; // 8 px of the summary's own padding
}

// The frontend's inset of a DOM widget's element on each side (BaseDOMWidgetImpl.DEFAULT_MARGIN where the
// widget does not say).
const DOM_WIDGET_MARGIN = 10;

function panelOf(node) {
  let widget = node.widgets?.find((w) => w.name === PANEL);
  if (!widget) {
    const element = document.createElement("div");
    element.className = "cachedsearch-panel";
    // Classic mode gives a DOM widget its minimum height when the node has no spare height (right after a live
    // run, the frontend's progress text and image preview widgets take the spare), and lays the element out
    // that height less the widget's margin on each side: the minimum must include both margins.
    const margin = () => widget?.margin ?? DOM_WIDGET_MARGIN;
    widget = node.addDOMWidget(PANEL, "cachedsearch", element, {
      serialize: false,
      hideOnZoom: false,
      getMinHeight: () => (element.minHeightAt?.(node.size[0] - 2 * margin(), element) ?? 0) + 2 * margin(),
    });
  }
  return widget.element;
}

// minHeight: the content's pixels, or a function of the panel's width.
function show(node, content, minHeight) {
  const panel = panelOf(node);
  panel.minHeightAt = typeof minHeight === "function" ? minHeight : () => minHeight;
  panel.replaceChildren(content);
  const needed = node.computeSize?.();
  if (needed && node.size[1] < needed[1]) node.setSize([node.size[0], needed[1]]);
  node.setDirtyCanvas?.(true, true);
}

function cell(tag, text) {
  const element = document.createElement(tag);
  element.textContent = text;
  return element;
}

function imageUrl(image) {
  const query = new URLSearchParams({ filename: image.filename, subfolder: image.subfolder ?? "", type: image.type ?? "temp" });
  return api.apiURL(`/view?${query}`);
}

function showLarge(image, caption) {
  const overlay = document.createElement("div");
  overlay.className = "cachedsearch-overlay";
  const picture = document.createElement("img");
  picture.src = imageUrl(image);
  overlay.append(picture, cell("div", caption));
  overlay.addEventListener("click", () => overlay.remove(), { once: true });
  document.body.append(overlay);
}

const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)}%` : "-");

function renderRanking(node, output) {
  const rows = output.cachedsearch_ranking;
  if (!Array.isArray(rows) || rows.length === 0) return false;
  const images = Array.isArray(output.images) ? output.images : [];
  const table = document.createElement("table");
  const header = document.createElement("tr");
  // Extra per-candidate columns: VideoScore's aspects, or each verifier behind a combined score.
  const columns = rows[0].columns && typeof rows[0].columns === "object" ? Object.keys(rows[0].columns) : [];
  for (const title of ["", "#", "seed", ...columns, "score", "skipped", "s"]) header.append(cell("th", title));
  table.append(header);
  const ranked = rows.map((row, index) => ({ ...row, image: images[index] })).sort((a, b) => b.score - a.score);
  for (const row of ranked) {
    const line = document.createElement("tr");
    line.className = row.winner ? "candidate winner" : "candidate";
    line.dataset.seed = row.seed;
    line.dataset.score = row.score;
    const thumbnail = document.createElement("td");
    if (row.image) {
      const picture = document.createElement("img");
      picture.src = imageUrl(row.image);
      thumbnail.append(picture);
      line.addEventListener("click", () => showLarge(row.image, `candidate ${row.candidate}, seed ${row.seed}, score ${row.score.toFixed(4)}`));
    }
    line.append(thumbnail, cell("td", `${row.winner ? "★ " : ""}${row.candidate}`), cell("td", row.seed));
    for (const name of columns) {
      const value = row.columns?.[name];
      const column = cell("td", typeof value === "number" ? value.toFixed(3) : "-");
      column.dataset.column = name;
      line.append(column);
    }
    line.append(cell("td", row.score.toFixed(4)), cell("td", percent(row.skipped, row.calls)), cell("td", row.seconds.toFixed(2)));
    table.append(line);
  }
  const pruned = prunedRows(output);
  for (const row of pruned) table.append(prunedLine(row, columns.length));
  show(node, table, 26 + 42 * ranked.length + 20 * pruned.length);
  return true;
}

// Candidates a pruned search dropped at its prune step, best preview first: greyed, with their preview score
// in the score column; they never reached the final ranking.
function prunedRows(output) {
  const rows = Array.isArray(output.cachedsearch_pruned) ? output.cachedsearch_pruned : [];
  return [...rows].sort((a, b) => b.preview_score - a.preview_score);
}

function prunedLine(row, columnCount) {
  const line = document.createElement("tr");
  line.className = "pruned";
  line.dataset.seed = row.seed;
  line.dataset.previewScore = row.preview_score;
  line.title = `pruned at step ${row.prune_step}: preview score ${row.preview_score.toFixed(4)}`;
  line.append(cell("td", ""), cell("td", "pruned"), cell("td", row.seed));
  for (let index = 0; index < columnCount; index += 1) line.append(cell("td", "-"));
  line.append(cell("td", `preview ${row.preview_score.toFixed(4)}`), cell("td", percent(row.skipped, row.calls)),
    cell("td", row.seconds.toFixed(2)));
  return line;
}

function renderDrafts(node, output) {
  const rows = output.cachedsearch_drafts;
  if (!Array.isArray(rows) || rows.length === 0) return false;
  const skipped = rows.reduce((sum, row) => sum + row.skipped, 0);
  const calls = rows.reduce((sum, row) => sum + row.calls, 0);
  const meanSeconds = rows.reduce((sum, row) => sum + row.seconds, 0) / rows.length;
  const saving = skipped > 0 && calls > skipped
    ? `${percent(skipped, calls)} of transformer calls skipped (~${(calls / (calls - skipped)).toFixed(2)}x fewer)`
    : "no transformer calls skipped";
  const pruned = prunedRows(output);
  const drafts = pruned.length
    ? `${rows.length} of ${rows.length + pruned.length} drafts kept at step ${pruned[0].prune_step} by preview score`
    : `${rows.length} drafts`;
  const budget = budgetLine(output.cachedsearch_budget?.[0]);
  showSummary(node, `${drafts}, ${saving}, mean ${meanSeconds.toFixed(2)} s per draft${budget}`);
  return true;
}

// A fixed-budget search's choice: N, what it predicted against best-of-M, the break-even width.
function budgetAmount(value, unit) {
  return unit === "wall time" ? `${value.toFixed(2)} s` : `${Math.round(value)} calls`;
}

function budgetLine(budget, measuredCommit) {
  if (!budget || typeof budget.full_cost !== "number") return "";
  const amount = (value) => budgetAmount(value, budget.unit);
  const breakEven = typeof budget.break_even_width === "number" ? `, N* ${budget.break_even_width.toFixed(2)}` : "";
  const wallTime = budget.deterministic ? "" : ", N depends on wall time";
  let line = `; budget best-of-${budget.rollouts} (${amount(budget.budget)}): N = ${budget.width}, predicted ` +
    `${amount(budget.predicted_total)}${breakEven}${wallTime}`;
  if (typeof measuredCommit === "number") {
    line += `; recommit predicted ${amount(budget.full_cost)}, measured ${amount(measuredCommit)}`;
  }
  return line;
}

function renderDelivery(node, output) {
  const delivery = output.cachedsearch_delivery?.[0];
  if (!delivery) return false;
  const cost = typeof delivery.relative_cost === "number"
    ? `search cost ${(100 * delivery.relative_cost).toFixed(1)}% of full best-of-${delivery.num_candidates}`
    : "no commit: drafts only";
  const budget = budgetLine(delivery.budget, delivery.budget?.measured_commit);
  showSummary(node, `delivered seed ${delivery.seed} (candidate ${delivery.candidate}, ${delivery.mode}); ${cost}${budget}`);
  return true;
}

function showSummary(node, text) {
  const line = cell("div", text);
  line.className = "cachedsearch-summary";
  show(node, line, (width, element) => summaryHeight(text, width, element));
}

function render(node, output) {
  const renderer = RENDERERS[node.comfyClass ?? node.type];
  if (!renderer || !output || typeof output !== "object") return;
  try {
    if (renderer(node, output)) node.properties[STORED] = output;
  } catch (error) {
    console.warn("CachedSearch: could not show this node's results", error);
  }
}

// Canonical form of a node and everything upstream of it in an API prompt: equal forms mean ComfyUI reuses
// one cached result for both.
function upstreamForm(prompt, id, memo) {
  if (memo.has(id)) return memo.get(id);
  const node = prompt[id];
  const inputs = Object.keys(node?.inputs ?? {}).sort().map((name) => {
    const value = node.inputs[name];
    return [name, Array.isArray(value) ? [upstreamForm(prompt, String(value[0]), memo), value[1]] : value];
  });
  const form = JSON.stringify([node?.class_type, inputs]);
  memo.set(id, form);
  return form;
}

async function historyEntry(promptId) {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const entry = (await (await api.fetchApi(`/history/${promptId}`)).json())[promptId];
    if (entry) return entry;
    await new Promise((resolve) => setTimeout(resolve, 150)); // the entry is stored just after success
  }
  return undefined;
}

// A re-queued unchanged graph reuses our nodes' cached results and the server sends them no "executed"
// (ComfyUI 0.33 resends results of has_intermediate_output nodes; 0.3.75 does not): show the newest result the
// history holds for the same node on the same inputs, as if the node had run.
async function showReusedResults(promptId, nodeIds) {
  const nodes = [...nodeIds].map((id) => app.graph.getNodeById(Number(id)) ?? app.graph.getNodeById(id))
    .filter((node) => node && RENDERERS[node.comfyClass ?? node.type]);
  if (nodes.length === 0) return;
  const current = (await historyEntry(promptId))?.prompt?.[2];
  if (!current) return;
  const history = Object.entries(await (await api.fetchApi("/history?max_items=64")).json()).reverse();
  for (const node of nodes) {
    const id = String(node.id);
    if (!current[id]) continue;
    const wanted = upstreamForm(current, id, new Map());
    for (const [otherId, entry] of history) {
      const prompt = entry.prompt?.[2];
      if (otherId === promptId || !prompt) continue;
      const memo = new Map();
      const match = Object.keys(entry.outputs ?? {}).find((key) => prompt[key]?.class_type === current[id].class_type &&
        upstreamForm(prompt, key, memo) === wanted);
      if (match) {
        render(node, entry.outputs[match]);
        break;
      }
    }
  }
}

const reusedByPrompt = new Map();
api.addEventListener("execution_cached", ({ detail }) => {
  if (detail?.prompt_id) reusedByPrompt.set(detail.prompt_id, new Set((detail.nodes ?? []).map(String)));
});
api.addEventListener("executed", ({ detail }) => {
  reusedByPrompt.get(detail?.prompt_id)?.delete(String(detail.display_node ?? detail.node));
});
api.addEventListener("execution_success", ({ detail }) => {
  const reused = reusedByPrompt.get(detail?.prompt_id);
  reusedByPrompt.delete(detail?.prompt_id);
  if (reused?.size) showReusedResults(detail.prompt_id, reused).catch((error) =>
    console.warn("CachedSearch: could not show reused results", error));
});
api.addEventListener("execution_error", ({ detail }) => reusedByPrompt.delete(detail?.prompt_id));
api.addEventListener("execution_interrupted", ({ detail }) => reusedByPrompt.delete(detail?.prompt_id));

app.registerExtension({
  name: "cachedsearch.results",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureStyle();
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (output) {
      onExecuted?.apply(this, arguments);
      render(this, output);
    };
    const onConfigure = nodeType.prototype.onConfigure;
    nodeType.prototype.onConfigure = function () {
      onConfigure?.apply(this, arguments);
      const stored = this.properties?.[STORED];
      if (stored) render(this, stored);
    };
    const clone = nodeType.prototype.clone;
    nodeType.prototype.clone = function () {
      const copy = clone.apply(this, arguments);
      if (copy?.properties) delete copy.properties[STORED]; // a copy has not run yet
      return copy;
    };
  },
});
