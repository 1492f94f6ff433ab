// A run cancelled or failed before a search's result node ran (Cancel while the Sampler drafts) sends that node
// nothing: its panel would go on showing the run before, under "newest run", while the widgets already say what
// the stopped search was. Each such Sampler and Verifier panel says instead that the newest run stopped before it,
// with "‹ earlier" onto the runs before; a Recommit says it delivered nothing in that run. Nodes the run took from
// ComfyUI's cache keep what they show (it is theirs). Exports only: ComfyUI loads every script under web/ as an
// extension, and this one registers nothing.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { cachedNodes } from "./cachedsearch_cached_runs.js";
import { renderDelivery, showNoDelivery } from "./cachedsearch_delivery.js";
import { workflowNodes } from "./cachedsearch_graph_nodes.js";
import { findRun, samplerOf } from "./cachedsearch_history.js";
import { rendererOf } from "./cachedsearch_panel.js";
import { showStopped } from "./cachedsearch_run_view.js";

const NOT_SEARCHED = "Nothing delivered in this run: it was cancelled or stopped before its search finished, so " +
  "it has no drafts to pick from. Queue the same search again to resume it (the drafts it saved are reused).";
const executedIn = new Map(); // prompt id -> ids of the nodes that sent "executed" in that run

api.addEventListener("execution_start", ({ detail }) => {
  executedIn.set(detail?.prompt_id, new Set());
  // a new run: what a stopped run left is no longer the newest (the panels say so once they show results)
  for (const { node } of workflowNodes()) delete node.cachedsearchStopped;
});
api.addEventListener("executed", ({ detail }) => {
  executedIn.get(detail?.prompt_id)?.add(String(detail.display_node ?? detail.node));
});
api.addEventListener("execution_success", ({ detail }) => executedIn.delete(detail?.prompt_id));

async function runStopped({ type, detail }) {
  const promptId = detail?.prompt_id;
  const executed = executedIn.get(promptId) ?? new Set();
  executedIn.delete(promptId);
  const run = await findRun(promptId);
  const workflowId = app.graph?.id; // a run of another workflow (a tab) is none of these panels' business
  if (!run || (workflowId && run.extraData.extra_pnginfo?.workflow?.id !== workflowId)) return;
  const reused = cachedNodes(promptId) ?? new Set();
  // the stopped run as the first of a panel's runs: "‹ earlier" steps from it onto the run before
  const head = { promptId, outputs: {}, stopped: true, notRun: new Set() };
  const recommits = [];
  for (const { node, id } of workflowNodes()) {
    const renderer = rendererOf(node);
    if (!renderer || run.prompt[id]?.class_type !== (node.comfyClass ?? node.type)) continue;
    if (executed.has(id) || reused.has(id)) continue;
    node.cachedsearchView = undefined;
    if (renderer === renderDelivery) {
      recommits.push([node, id]);
      continue;
    }
    head.notRun.add(id);
    node.cachedsearchStopped = { run: head, failed: type === "execution_error" };
    showStopped(node);
  }
  // a Recommit whose search never finished has no drafts of this run to commit or keep
  for (const [node, id] of recommits) {
    showNoDelivery(node, head.notRun.has(samplerOf(run.prompt, id)) ? NOT_SEARCHED : undefined);
  }
}
for (const event of ["execution_interrupted", "execution_error"]) {
  api.addEventListener(event, (message) => runStopped(message).catch((error) =>
    console.warn("CachedSearch: could not show the stopped run on the panels", error)));
}
