// Where a node's panel gets its results: each run's UI payload (node.onExecuted, once per run, with the run's
// prompt id from its execution_start), the copy kept in node.properties (a saved workflow shows its results on
// load), and, when a re-queued graph reuses the node's cached result, the server's history. ComfyUI then sends
// that node no "executed" event (0.33 resends the results of has_intermediate_output nodes; 0.3.75 does not), so
// once the run succeeds the panel shows the result of the newest run in the history in which the same node ran on
// the same inputs. Exports only: ComfyUI loads every script under web/ as an extension, and this one registers
// nothing.
import { api } from "../../../scripts/api.js";
import { cachedNodes } from "./cachedsearch_cached_runs.js";
import { executionIdOf, nodeByExecutionId } from "./cachedsearch_graph_nodes.js";
import { findRun, recentRuns } from "./cachedsearch_history.js";

const renderers = new Map(); // node class -> {render(node, output, promptId), stored: the property its output is kept in}
const executedByPrompt = new Map(); // prompt id -> ids of the nodes this run sent "executed" (0.33 resends some)
const progressTexts = new Map(); // node id -> the progress text the server sent it last in this run
let runningPrompt; // the run executing now (its execution_start)

// Draws `render(node, output, promptId)` on every run of a node of this type and from its kept copy when a
// workflow is loaded; `storedKeys`: the node.properties the renderer keeps (the first holds the output), which a
// copied node starts without. `whenReused`: also when a run reuses the node's cached result.
export function showResultsOn(nodeType, classType, render, storedKeys, whenReused = true) {
  if (whenReused) renderers.set(classType, { render, stored: storedKeys[0] });
  const onExecuted = nodeType.prototype.onExecuted;
  nodeType.prototype.onExecuted = function (output) {
    onExecuted?.apply(this, arguments);
    removeProgressText(this);
    render(this, output, runningPrompt);
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

// A finished node's progress text ("draft 8 / 8 (seed …)", which the frontend keeps until the next run) would
// stand above its results as if it were still running: the widget showing the text the server sent this node
// last is removed.
function removeProgressText(node) {
  const id = executionIdOf(node);
  const text = progressTexts.get(id);
  progressTexts.delete(id);
  const widget = text === undefined ? undefined : node.widgets?.find((candidate) => candidate.value === text);
  if (!widget) return;
  node.removeWidget(widget);
  node.setDirtyCanvas?.(true, true);
}

// The node a server event names by its execution id ("18:12" inside a subgraph).
export function graphNode(id) {
  return nodeByExecutionId(id);
}

async function showReusedResults(promptId, nodeIds) {
  const nodes = [...nodeIds].map((id) => ({ id: String(id), node: graphNode(id) }))
    .filter(({ node }) => node && renderers.has(node.comfyClass ?? node.type));
  if (nodes.length === 0) return;
  const current = (await findRun(promptId))?.prompt;
  if (!current) return;
  const runs = (await recentRuns(64)).filter((run) => run.promptId !== promptId);
  for (const { id, node } of nodes) {
    if (!current[id]) continue;
    const inputs = JSON.stringify(current[id].inputs);
    const made = runs.find((run) => run.outputs[id] && run.prompt[id]?.class_type === current[id].class_type &&
      JSON.stringify(run.prompt[id].inputs) === inputs);
    const { render, stored } = renderers.get(node.comfyClass ?? node.type);
    if (made) {
      render(node, made.outputs[id], promptId);
    } else if (node.properties?.[stored] && !node.cachedsearchView) {
      // No run in the history ran this node under this id (it was converted into a subgraph since, "12" became
      // "18:12"): what it shows was made on these very inputs, and is what ComfyUI reused; it is now this run's,
      // so a pick from it queues this run, whose prompt names the node as it is now.
      render(node, node.properties[stored], promptId);
    }
  }
}

api.addEventListener("execution_start", ({ detail }) => {
  runningPrompt = detail?.prompt_id;
});
api.addEventListener("progress_text", ({ detail }) => {
  if (detail?.nodeId !== undefined && typeof detail.text === "string") progressTexts.set(String(detail.nodeId), detail.text);
});
api.addEventListener("executed", ({ detail }) => {
  if (!detail?.prompt_id) return;
  if (!executedByPrompt.has(detail.prompt_id)) executedByPrompt.set(detail.prompt_id, new Set());
  executedByPrompt.get(detail.prompt_id).add(String(detail.display_node ?? detail.node));
});
api.addEventListener("execution_success", ({ detail }) => {
  const executed = executedByPrompt.get(detail?.prompt_id) ?? new Set();
  executedByPrompt.delete(detail?.prompt_id);
  const reused = [...(cachedNodes(detail?.prompt_id) ?? [])].filter((id) => !executed.has(id));
  if (reused.length) showReusedResults(detail.prompt_id, reused).catch((error) =>
    console.warn("CachedSearch: could not show reused results", error));
});
// A run that was cancelled or failed sends its nodes no "executed": the progress texts it left ("waiting for your
// pick; Cancel stops the run", "rollout 36 / 72 ...") would stand as if it still ran, so they go too.
function runEnded({ detail }) {
  executedByPrompt.delete(detail?.prompt_id);
  for (const id of [...progressTexts.keys()]) {
    const node = graphNode(id);
    if (node) removeProgressText(node);
    else progressTexts.delete(id);
  }
}
api.addEventListener("execution_error", runEnded);
api.addEventListener("execution_interrupted", runEnded);
