// The workflow's nodes across subgraphs, by the id a prompt gives them. A queued prompt names a node inside a
// subgraph by its execution id, the path of node ids from the top-level graph ("18:12": node 12 inside the subgraph
// node 18; a top-level node by its own id), and the server's events (executed, progress_text, execution_cached, a
// Recommit's wait) and the history use that id; a node's own `id` is local to the graph it is in. Public frontend
// pieces only: app.graph (the top-level graph), graph.nodes, graph.getNodeById, node.isSubgraphNode() and
// node.subgraph (the graph inside a subgraph node), graph.inputNode.slots[i].getLinks() (the links from a subgraph's
// input i). A subgraph used by two subgraph nodes holds one set of nodes: their panels show the first of them.
// Exports only: ComfyUI loads every script under web/ as an extension, and this one registers nothing.
import { app } from "../../../scripts/app.js";

// Every node of the workflow with its execution id, [{node, id}], subgraphs' nodes after their subgraph node.
export function workflowNodes(graph = app.graph, prefix = "") {
  const found = [];
  for (const node of graph?.nodes ?? []) {
    const id = `${prefix}${node.id}`;
    found.push({ node, id });
    if (node.isSubgraphNode?.() && node.subgraph) found.push(...workflowNodes(node.subgraph, `${id}:`));
  }
  return found;
}

// The node that execution id `executionId` names; undefined when the workflow has none.
export function nodeByExecutionId(executionId) {
  let graph = app.graph;
  let node;
  for (const part of String(executionId).split(":")) {
    node = graph?.getNodeById?.(Number(part)) ?? graph?.getNodeById?.(part);
    if (!node) return undefined;
    graph = node.subgraph;
  }
  return node;
}

// The execution id of `node` (its own id where it is in the top-level graph or in no graph).
export function executionIdOf(node) {
  if (!node?.graph || node.graph === app.graph) return String(node?.id);
  return workflowNodes().find((entry) => entry.node === node)?.id ?? String(node.id);
}

// The subgraph nodes that hold `node`, outermost first ([] for a top-level node).
export function enclosingNodes(node) {
  const id = executionIdOf(node).split(":");
  return id.slice(0, -1).map((_, index) => nodeByExecutionId(id.slice(0, index + 1).join(":"))).filter(Boolean);
}

// The widgets whose value a prompt takes for `node`'s widget `name`: its own and, where that input is linked to its
// subgraph's input (converting to a subgraph promotes a seed so on frontend 1.58), the subgraph node's widget of
// that input, outward. Setting them all sets what the next run uses.
export function widgetsSetting(node, name) {
  const own = (node.widgets ?? []).filter((widget) => widget.name === name);
  const slot = node.inputs?.findIndex((input) => input.widget?.name === name) ?? -1;
  const feeding = slot < 0 ? -1 : subgraphInputFeeding(node, slot);
  if (feeding < 0) return own;
  const holder = enclosingNodes(node).at(-1);
  const outer = holder?.inputs?.[feeding]?.widget?.name;
  return outer ? [...own, ...widgetsSetting(holder, outer)] : own;
}

// The index of the subgraph input that `node`'s input `slot` is linked to; -1 where it is linked elsewhere or not
// at all, or the node is in the top-level graph. Read from the subgraph's input slots' links: frontend 1.58 warns on
// reading input.link, and a subgraph node's own getInputLink(slot) follows the link inside it, not the one into it.
function subgraphInputFeeding(node, slot) {
  const inputs = node.graph?.inputNode?.slots ?? [];
  return inputs.findIndex((input) => input.getLinks().some((link) =>
    String(link.target_id) === String(node.id) && link.target_slot === slot));
}
