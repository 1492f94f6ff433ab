// Where a node's panel gets its results: each run's UI payload, the copy kept in node.properties (a saved
// workflow shows its results on load), and, when a re-queued graph reuses the node's cached result, the
// server's history. ComfyUI then sends that node no "executed" event (0.33 resends the results of
// has_intermediate_output nodes; 0.3.75 does not), so once the run succeeds the panel shows the newest result
// the history holds for the same node on the same inputs.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { upstreamForm } from "./cachedsearch_pick.js";

const renderers = new Map(); // node class -> render(node, output, promptId)
const reusedByPrompt = new Map(); // prompt id -> ids of reused nodes that have not been sent "executed"

// Draws `render(node, output)` on every run of a node of this type and from its kept copy when a workflow is
// loaded; `storedKeys`: the node.properties the renderer keeps (the first holds the output), which a copied
// node starts without.
export function showResultsOn(nodeType, render, storedKeys) {
  const onExecuted = nodeType.prototype.onExecuted;
  nodeType.prototype.onExecuted = function (output) {
    onExecuted?.apply(this, arguments);
    removeProgressText(this);
    render(this, output);
  };
  const onConfigure = nodeType.prototype.onConfigure;
  nodeType.prototype.onConfigure = function () {
    onConfigure?.apply(this, arguments);
    const stored = this.properties?.[storedKeys[0]];
    if (stored) render(this, stored);
  };
  const clone = nodeType.prototype.clone;
  nodeType.prototype.clone = function () {
    const copy = clone.apply(this, arguments);
    for (const key of storedKeys) delete copy?.properties?.[key]; // a copy has not run yet
    return copy;
  };
}

// The frontend's widget for a node's progress_text ("draft 8 / 8 (seed …)"), which it keeps until the next run.
const PROGRESS_TEXT = "$$node-text-preview";

// A finished node's progress text would stand above its results as if it were still running: removed the way the
// frontend removes it when the node's results arrive.
export function removeProgressText(node) {
  const index = node.widgets?.findIndex((widget) => widget.name === PROGRESS_TEXT) ?? -1;
  if (index < 0) return;
  node.widgets[index].onRemove?.();
  node.widgets.splice(index, 1);
  node.setDirtyCanvas?.(true, true);
}

export function showWhenReused(classType, render) {
  renderers.set(classType, render);
}

export function graphNode(id) {
  return app.graph?.getNodeById?.(Number(id)) ?? app.graph?.getNodeById?.(id);
}

export async function historyEntry(promptId) {
  for (let attempt = 0; attempt < 20; attempt += 1) {
    const entry = (await (await api.fetchApi(`/history/${promptId}`)).json())[promptId];
    if (entry) return entry;
    await new Promise((resolve) => setTimeout(resolve, 150)); // the entry is stored just after success
  }
  return undefined;
}

async function showReusedResults(promptId, nodeIds) {
  const nodes = [...nodeIds].map(graphNode).filter((node) => node && renderers.has(node.comfyClass ?? node.type));
  if (nodes.length === 0) return;
  const current = (await historyEntry(promptId))?.prompt?.[2];
  if (!current) return;
  const history = Object.entries(await (await api.fetchApi("/history?max_items=64")).json()).reverse();
  for (const node of nodes) {
    const id = String(node.id);
    if (!current[id]) continue;
    const wanted = upstreamForm(current, id);
    for (const [otherId, entry] of history) {
      const prompt = entry.prompt?.[2];
      if (otherId === promptId || !prompt) continue;
      const memo = new Map();
      const match = Object.keys(entry.outputs ?? {}).find((key) => prompt[key]?.class_type === current[id].class_type &&
        upstreamForm(prompt, key, memo) === wanted);
      if (match) {
        renderers.get(node.comfyClass ?? node.type)(node, entry.outputs[match], promptId);
        break;
      }
    }
  }
}

api.addEventListener("execution_cached", ({ detail }) => {
  if (detail?.prompt_id) reusedByPrompt.set(detail.prompt_id, new Set((detail.nodes ?? []).map(String)));
});
api.addEventListener("executed", ({ detail }) => {
  reusedByPrompt.get(detail?.prompt_id)?.delete(String(detail?.display_node ?? detail?.node));
});
api.addEventListener("execution_success", ({ detail }) => {
  const reused = reusedByPrompt.get(detail?.prompt_id);
  reusedByPrompt.delete(detail?.prompt_id);
  if (reused?.size) showReusedResults(detail.prompt_id, reused).catch((error) =>
    console.warn("CachedSearch: could not show reused results", error));
});
api.addEventListener("execution_error", ({ detail }) => reusedByPrompt.delete(detail?.prompt_id));
api.addEventListener("execution_interrupted", ({ detail }) => reusedByPrompt.delete(detail?.prompt_id));
