// The way through this workflow's runs on its panels: "‹ earlier" / "newer ›" shows every panel as one run of the
// server's history left it, and a panel whose node the newest run stopped before says so (the stopped run itself
// is recorded by cachedsearch_stopped.js). Exports only: ComfyUI loads every script under web/ as an extension, and
// this one registers nothing.
import { app } from "../../../scripts/app.js";
import { renderDelivery, showNoDelivery } from "./cachedsearch_delivery.js";
import { element, wrappedLines } from "./cachedsearch_dom.js";
import { executionIdOf, workflowNodes } from "./cachedsearch_graph_nodes.js";
import { FONT, LINE_HEIGHT, rendererOf, show, STORED_PROMPT } from "./cachedsearch_panel.js";
import { earlierRuns } from "./cachedsearch_pick.js";

// What the panel of a node that the newest run stopped before says (`failed`: stopped by an error, not cancelled).
export function stoppedText(failed) {
  return `The newest run was ${failed ? "stopped by an error" : "cancelled"} before this node ` +
    "finished: it has nothing to show from it. ‹\u00a0earlier shows the runs before.";
}

// The stopped run's panel on `node` (node.cachedsearchStopped: {run, failed}, set when the run ended).
export function showStopped(node) {
  const stopped = node.cachedsearchStopped;
  if (!stopped) return;
  const text = stoppedText(stopped.failed);
  const content = element("div");
  content.append(runNavigation(node), element("div", text, "cachedsearch-summary cachedsearch-stopped"));
  show(node, content, (width) => 8 + LINE_HEIGHT * (wrappedLines(text, width, FONT) + 1) + 4);
}

// Every panel of this graph as run `runs[index]` left it (index 0: the newest), so the drafts, the ranking and
// the delivery shown are one run's. A node that showed nothing in that run keeps what it shows (ComfyUI reused
// it), except a Recommit of a run that was cancelled or failed: it delivered nothing there, and says so. A run
// stopped before some panels' nodes ran (cachedsearch_stopped.js, always runs[0]) names them in `notRun`.
function showRun(runs, index) {
  const { promptId, outputs, stopped, notRun } = runs[index];
  for (const { node, id } of workflowNodes()) {
    const renderer = rendererOf(node);
    if (renderer && notRun?.has(id)) {
      node.cachedsearchView = undefined;
      showStopped(node);
      continue;
    }
    const output = outputs[id];
    if (!renderer || (!output && !(stopped && renderer === renderDelivery))) continue;
    node.cachedsearchView = index === 0 ? undefined : { runs, index, promptId };
    if (output) renderer(node, output);
    else showNoDelivery(node);
  }
}

// "‹ earlier" / "newer ›" through this workflow's runs in the server's history.
export function runNavigation(node) {
  const line = element("div", undefined, "cachedsearch-line cachedsearch-runs");
  const view = node.cachedsearchView;
  // after a run that stopped before this node, the newest run is that one, with nothing to show here
  const stopped = view ? undefined : node.cachedsearchStopped;
  const newest = stopped ? `${stopped.failed ? "failed" : "cancelled"} run` : "newest run";
  const label = element("span", view ? `earlier run ${view.index} of ${view.runs.length - 1}` : newest);
  const step = async (by) => {
    try {
      const runs = view?.runs ?? [...(stopped ? [stopped.run] : []),
        ...(await earlierRuns(executionIdOf(node), node.comfyClass ?? node.type, app.graph?.id))];
      const index = (view?.index ?? 0) + by;
      if (index < 0 || index >= runs.length) return;
      showRun(runs, index);
    } catch (error) {
      label.textContent = `history unavailable: ${error.message}`;
    }
  };
  const earlier = element("button", "‹ earlier", "cachedsearch-earlier");
  earlier.title = "Show this workflow's earlier run (from ComfyUI's history) on every panel, to pick from its drafts";
  earlier.addEventListener("click", () => step(1));
  // disabled where there is no earlier run: browsing, on the last; on the newest, once the history shows none (a
  // click before it answers looks itself)
  earlier.disabled = view ? view.index >= view.runs.length - 1 : false;
  if (!view) {
    earlierRuns(executionIdOf(node), node.comfyClass ?? node.type, app.graph?.id)
      .then((runs) => {
        // the run shown is drawn while it still runs, before the history holds it: it counts all the same
        const known = new Set([...runs.map((run) => run.promptId), node.properties?.[STORED_PROMPT]].filter(Boolean));
        earlier.disabled = known.size + (stopped ? 1 : 0) < 2;
      })
      .catch(() => {}); // a click then says why the history is unavailable
  }
  const newer = element("button", "newer ›", "cachedsearch-newer");
  newer.disabled = !view;
  newer.addEventListener("click", () => step(-1));
  line.append(earlier, newer, " ", label);
  return line;
}
