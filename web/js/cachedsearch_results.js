// Shows a search's results on its nodes: the ranked drafts on the Verifier, a draft summary on the
// samplers, the delivered seed and cost on Recommit. Data comes from the nodes' UI payloads and is
// kept in node.properties so it survives a page reload with the saved workflow.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";

const PANEL = "cachedsearch_results";
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
.cachedsearch-panel table { border-collapse: collapse; width: 100%; }
.cachedsearch-panel td, .cachedsearch-panel th { padding: 2px 4px; text-align: right; }
.cachedsearch-panel tr.candidate { cursor: pointer; }
.cachedsearch-panel tr.winner { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
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

function panelOf(node) {
  let widget = node.widgets?.find((w) => w.name === PANEL);
  if (!widget) {
    const element = document.createElement("div");
    element.className = "cachedsearch-panel";
    widget = node.addDOMWidget(PANEL, "cachedsearch", element, {
      serialize: false,
      hideOnZoom: false,
      getMinHeight: () => Number(element.dataset.minHeight ?? 24),
    });
  }
  return widget.element;
}

function show(node, content, minHeight) {
  const panel = panelOf(node);
  panel.dataset.minHeight = minHeight;
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
  show(node, table, 26 + 42 * ranked.length);
  return true;
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
  show(node, cell("div", `${rows.length} drafts, ${saving}, mean ${meanSeconds.toFixed(2)} s per draft`), 36);
  return true;
}

function renderDelivery(node, output) {
  const delivery = output.cachedsearch_delivery?.[0];
  if (!delivery) return false;
  const cost = typeof delivery.relative_cost === "number"
    ? `search cost ${(100 * delivery.relative_cost).toFixed(1)}% of full best-of-${delivery.num_candidates}`
    : "no commit: drafts only";
  show(node, cell("div", `delivered seed ${delivery.seed} (candidate ${delivery.candidate}, ${delivery.mode}); ${cost}`), 36);
  return true;
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
