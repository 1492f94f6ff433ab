// The results panel of a search's nodes (Sampler, Verifier, Recommit): its style, its DOM widget sized to its
// content, the node.properties a shown result is kept in, and which renderer draws each node class. Exports only:
// ComfyUI loads every script under web/ as an extension, and this one registers nothing.
import { ensurePlayerStyle } from "./cachedsearch_player.js";
import { ensureStyle, fitNode, panelElement } from "./cachedsearch_dom.js";

export const PANEL = "cachedsearch_results";
export const FONT = "11px sans-serif";
export const LINE_HEIGHT = 15;
export const STORED = "cachedsearch_last_output";
export const STORED_PROMPT = "cachedsearch_last_prompt";

const STYLE = `
.cachedsearch-panel { font: ${FONT}; color: var(--fg-color, #ddd); overflow: hidden; }
.cachedsearch-panel .cachedsearch-content { display: flow-root; }
.cachedsearch-line { line-height: ${LINE_HEIGHT}px; padding: 2px 0; overflow-wrap: anywhere; }
.cachedsearch-summary { line-height: ${LINE_HEIGHT}px; padding: 4px 0; overflow-wrap: anywhere; }
.cachedsearch-muted { opacity: 0.7; }
.cachedsearch-panel table { border-collapse: collapse; width: 100%; }
.cachedsearch-panel td, .cachedsearch-panel th { padding: 1px 3px; text-align: right; white-space: nowrap; }
.cachedsearch-panel th { font-weight: normal; opacity: 0.7; }
.cachedsearch-panel tr.winner { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-panel tr.pruned td:not(.pick) { opacity: 0.5; font-style: italic; }
.cachedsearch-panel td.seed { cursor: copy; }
.cachedsearch-panel .bar { height: 3px; background: #6a6; margin-top: 1px; }
.cachedsearch-panel button { font: 10px sans-serif; padding: 0 3px; margin: 0 0 0 2px; cursor: pointer; }
.cachedsearch-panel .cachedsearch-strip { display: flex; flex-wrap: wrap; gap: 3px; }
.cachedsearch-panel .cachedsearch-strip figure { margin: 0; text-align: center; }
.cachedsearch-panel .cachedsearch-wait { background: rgba(200, 150, 40, 0.35); padding: 3px; }`;

export function ensureResultsStyle() {
  ensurePlayerStyle();
  ensureStyle("cachedsearch-style", STYLE);
}

// The renderer of each node class: render(node, output) draws the output and says whether it could.
const renderers = new Map();

export function setRenderer(classType, render) {
  renderers.set(classType, render);
}

export function rendererOf(node) {
  return renderers.get(node.comfyClass ?? node.type);
}

// The content's height: as laid out when it is on the page at that width, else as estimated for that width.
function contentHeight(panel, width) {
  const content = panel.firstElementChild;
  if (!content) return 0;
  const estimate = panel.estimateHeight?.(width) ?? 0;
  // Right after a live run the element may not yet be laid out at the node's width (a few pixels wide, its text
  // wrapped into a column thousands of pixels tall): its height counts only once it has that width.
  const laidOutAtWidth = Math.abs(panel.clientWidth - width) <= 2;
  return Math.max(estimate, laidOutAtWidth ? content.offsetHeight : 0);
}

// The node's results panel (made on first use). Classic mode gives a DOM widget its minimum height when the node
// has no spare height (right after a live run, the frontend's progress text and image preview widgets take the
// spare): the minimum is the content's height.
export function resultsPanel(node) {
  return panelElement(node, PANEL, "cachedsearch-panel", contentHeight);
}

// A panel's content; `estimate(width)`: its height before it is laid out. The node grows to fit it (height, and
// width where a table is wider than the node).
export function show(node, content, estimate) {
  const panel = resultsPanel(node);
  panel.estimateHeight = estimate;
  content.classList.add("cachedsearch-content");
  panel.replaceChildren(content);
  fitNode(node);
  requestAnimationFrame(() => fitNode(node, panel));
}
