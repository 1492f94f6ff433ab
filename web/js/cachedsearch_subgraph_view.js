// What a subgraph node shows, from the graph it is in, of the CachedSearch nodes inside it (at any depth): one line
// saying what the search inside did (the Verifier's ranking, the Recommit's delivery, Calibrate's tau) or that a
// Recommit inside waits for a pick, and a button that opens the subgraph holding them, where the panels are. It
// reads what the inner nodes keep in their properties, so it is redrawn after each of their runs, when a wait
// starts or ends, and when a workflow is loaded. Public frontend pieces: addDOMWidget, node.subgraph,
// app.canvas.openSubgraph (the frontend's own way into a subgraph, its title button).
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { element, fitNode, panelElement, wrappedLines } from "./cachedsearch_dom.js";
import { nodeByExecutionId, workflowNodes } from "./cachedsearch_graph_nodes.js";
import { FONT, LINE_HEIGHT, STORED } from "./cachedsearch_panel.js";
import { onWaitingChanged, waiting } from "./cachedsearch_pick.js";

const INSIDE = "cachedsearch_inside";
const CALIBRATION = "cachedsearch_calibration_output"; // Calibrate's kept result (cachedsearch_calibrate.js)

// What an inner node's kept result says, in a few words; undefined: nothing to say.
function resultWords(node) {
  const output = node.properties?.[STORED];
  const title = node.title ?? node.type;
  const ranking = output?.cachedsearch_ranking;
  if (Array.isArray(ranking) && ranking.length) {
    const best = ranking.find((row) => row.winner);
    return `${title} ranked ${ranking.filter((row) => !row.pruned).length} drafts` +
      (best ? ` (best: candidate ${best.candidate}, seed ${best.seed})` : "");
  }
  const delivery = output?.cachedsearch_delivery?.[0];
  if (delivery) return `${title} delivered seed ${delivery.seed} (candidate ${delivery.candidate}, ${delivery.mode})`;
  const calibration = node.properties?.[CALIBRATION]?.cachedsearch_calibration?.[0];
  if (calibration) return `${title} calibrated ${calibration.rows?.length ?? 0} taus (recommended tau ${calibration.recommended_tau})`;
  return undefined;
}

// The line of subgraph node `id` (execution id) about the nodes inside it, and the execution id of the subgraph
// node that holds the first of them (where the button leads); undefined when none has anything to say.
function insideOf(id, nodes) {
  const inner = nodes.filter((entry) => entry.id.startsWith(`${id}:`));
  const waits = [...waiting.values()].filter((wait) => wait.node.startsWith(`${id}:`));
  const said = inner.map((entry) => ({ ...entry, words: resultWords(entry.node) })).filter((entry) => entry.words);
  const first = waits[0]?.node ?? said[0]?.id;
  if (!first) return undefined;
  const parts = waits.map((wait) => `${nodeByExecutionId(wait.node)?.title ?? "A Recommit"} inside waits for your ` +
    `pick among ${wait.candidates} drafts`);
  if (!waits.length) parts.push(...said.map((entry) => entry.words));
  return { text: `CachedSearch inside: ${parts.join("; ")}. The drafts and the pick are on its panels:`,
    holder: first.split(":").slice(0, -1).join(":") };
}

// Opens, one level after the other, the subgraphs down to the one of subgraph node `holder` (an execution id).
function openDownTo(holder) {
  const canvas = app.canvas;
  const ids = holder.split(":");
  canvas.setGraph?.(app.graph);
  for (let depth = 1; depth <= ids.length; depth += 1) {
    const node = nodeByExecutionId(ids.slice(0, depth).join(":"));
    if (node?.subgraph) canvas.openSubgraph?.(node.subgraph, node);
  }
}

function showInside(node, inside) {
  const existing = node.widgets?.find((widget) => widget.name === INSIDE);
  if (!inside && !existing) return;
  const panel = panelElement(node, INSIDE, "cachedsearch-panel cachedsearch-inside",
    (shown, width) => 8 + LINE_HEIGHT * (wrappedLines(shown.dataset.text ?? "", width, FONT) + 1));
  panel.dataset.text = inside?.text ?? "";
  const content = element("div", undefined, "cachedsearch-content");
  if (inside) {
    content.append(element("div", inside.text, "cachedsearch-summary"));
    const open = element("button", "open the subgraph", "cachedsearch-open-subgraph");
    open.title = "Show the graph inside, where the search's panels are (the frontend's own way in: the icon at " +
      "this node's top right)";
    open.addEventListener("click", () => openDownTo(inside.holder));
    content.append(open);
  }
  panel.replaceChildren(content);
  fitNode(node);
}

// Redraws the line on every subgraph node of the workflow.
function refresh() {
  const nodes = workflowNodes();
  for (const { node, id } of nodes) {
    if (node.isSubgraphNode?.()) showInside(node, insideOf(id, nodes));
  }
}

const later = () => requestAnimationFrame(() => {
  try {
    refresh();
  } catch (error) {
    console.warn("CachedSearch: could not show the search inside a subgraph", error);
  }
});
// the inner node has drawn its panel (and kept its result) by the next frame
api.addEventListener("executed", ({ detail }) => {
  if (String(detail?.display_node ?? detail?.node).includes(":")) later();
});
api.addEventListener("execution_success", later); // a reused node's results are shown when its run ends
onWaitingChanged(later);

app.registerExtension({
  name: "cachedsearch.subgraph_view",
  afterConfigureGraph() {
    later();
  },
});
