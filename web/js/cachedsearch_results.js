// Shows a search's results on its nodes: the ranked drafts on the Verifier, the drafts and their cost on the
// samplers, the delivered seed and who chose it on Recommit. Data comes from the nodes' UI payloads (one render
// per run, through node.onExecuted) and is kept in node.properties so it survives a page reload with the saved
// workflow; fields an older CachedSearch did not send are left out of the panels. The panels' parts live in
// their own modules: cachedsearch_panel.js (the widget), cachedsearch_rows.js (payload readers), one per renderer
// (cachedsearch_ranking.js, cachedsearch_drafts.js, cachedsearch_delivery.js) and cachedsearch_pick_ui.js.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { fitNode } from "./cachedsearch_dom.js";
import { renderDelivery, showWaiting } from "./cachedsearch_delivery.js";
import { renderDrafts } from "./cachedsearch_drafts.js";
import { workflowNodes } from "./cachedsearch_graph_nodes.js";
import {
  ensureResultsStyle, rendererOf, setRenderer, STORED, STORED_PROMPT,
} from "./cachedsearch_panel.js";
import { loadWaiting, onWaitingChanged } from "./cachedsearch_pick.js";
import { renderRanking } from "./cachedsearch_ranking.js";
import { graphNode, showResultsOn } from "./cachedsearch_reused.js";

const RENDERERS = {
  CachedSearchVerifier: renderRanking,
  CachedSearchSampler: renderDrafts,
  CachedSearchSamplerAdvanced: renderDrafts,
  CachedSearchSamplerExperts: renderDrafts,
  CachedSearchRecommit: renderDelivery,
  CachedSearchVideoVerifier: renderRanking,
  CachedSearchCombineScores: renderRanking,
};
for (const [classType, render] of Object.entries(RENDERERS)) setRenderer(classType, render);

// Draws `output` on `node`; `promptId`: the run it comes from (none for the copy a saved workflow kept).
function render(node, output, promptId) {
  const renderer = rendererOf(node);
  if (!renderer || !output || typeof output !== "object") return;
  try {
    if (promptId !== undefined) {
      node.cachedsearchView = undefined;
      node.properties[STORED_PROMPT] = promptId;
    }
    if (renderer(node, output) && !node.cachedsearchView) node.properties[STORED] = output;
    if (renderer === renderDelivery) showWaiting(node);
  } catch (error) {
    console.warn("CachedSearch: could not show this node's results", error);
  }
}

api.addEventListener("progress_text", ({ detail }) => {
  const node = graphNode(String(detail?.nodeId));
  if (node && rendererOf(node)) requestAnimationFrame(() => fitNode(node));
});
onWaitingChanged(() => {
  const nodes = workflowNodes().map((entry) => entry.node);
  for (const node of nodes) {
    if ((node.comfyClass ?? node.type) === "CachedSearchRecommit") showWaiting(node);
  }
  // the drafts' pick notes say whether a pick answers a wait or queues a run
  for (const node of nodes) {
    const stored = node.properties?.[STORED];
    if (stored && rendererOf(node) && rendererOf(node) !== renderDelivery && !node.cachedsearchView &&
      !node.cachedsearchStopped) {
      rendererOf(node)(node, stored);
    }
  }
});

app.registerExtension({
  name: "cachedsearch.results",
  async setup() {
    await loadWaiting();
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureResultsStyle();
    showResultsOn(nodeType, nodeData.name, render, [STORED, STORED_PROMPT]);
  },
});
