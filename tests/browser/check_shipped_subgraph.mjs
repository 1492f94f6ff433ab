// A workflow in the shape of ComfyUI's official templates (its pipeline in a subgraph) in headless Debian Chromium
// against a real ComfyUI server: what the frontend queues for each workflow of config.prompts
// (app.graphToPrompt()), then the tiny variant of the shipped one loaded (missing nodes, warnings), queued twice,
// its subgraph opened (the panels inside, the drafts' frames) and "Commit this" on a draft the verifier did not
// choose. Prints one JSON object with what it saw.
// Usage: node check_shipped_subgraph.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadedFrames, nextRun as nextRunOn, openChromium, openWorkflow, recordExtensionErrors, settled,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], prompts: {}, loadWarnings: [] };
const warnings = [];

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);
page.on("console", (message) => {
  // blocked network requests (no internet here) are the sandbox's, not the workflow's
  if (["warning", "error"].includes(message.type()) && !message.text().includes("Content Security Policy")) {
    warnings.push(`${message.type()}: ${message.text()}`.slice(0, 300));
  }
});

// Every node with its execution id, subgraphs included; the first of a type; the panel of the first of a type.
const HELPERS = () => {
  window.csAll = (graph = window.app.graph, prefix = "") => (graph?.nodes ?? []).flatMap((node) => [
    { node, id: `${prefix}${node.id}` },
    ...(node.isSubgraphNode?.() && node.subgraph ? window.csAll(node.subgraph, `${prefix}${node.id}:`) : [])]);
  window.csFind = (type) => window.csAll().find((entry) => entry.node.type === type);
  window.csPanel = (type) => window.csFind(type)?.node.widgets?.find((w) => w.name === "cachedsearch_results")?.element;
};

// Loads a workflow as opening its file does; returns the node types the frontend does not know.
async function loadWorkflow(path) {
  const missing = await page.evaluate(async (data) => {
    const missing = new Set();
    const original = window.app.showMissingNodesError;
    window.app.showMissingNodesError = (types) => types.forEach((t) => missing.add(typeof t === "string" ? t : t.type));
    try {
      await window.app.loadGraphData(data);
    } finally {
      window.app.showMissingNodesError = original;
    }
    for (const { node } of window.csAll()) {
      if (!node.isSubgraphNode?.() && !(node.type in window.LiteGraph.registered_node_types)) missing.add(node.type);
    }
    return [...missing].sort();
  }, JSON.parse(readFileSync(path, "utf8")));
  await settled(page, `the workflow ${path}`);
  return missing;
}

// What the Run button would queue: graphToPrompt's API graph, without the titles (_meta) the server ignores.
const queuedGraph = () => page.evaluate(async () => {
  const { output } = await window.app.graphToPrompt();
  return Object.fromEntries(Object.entries(output).map(([id, node]) => [id,
    { class_type: node.class_type, inputs: node.inputs }]));
});

// Starts a run with `start`; resolves once it ended with its queued seed, what it reused and what each node showed.
async function nextRun(start) {
  const run = await nextRunOn(page, start, 600000);
  if (run.end === "refused") return { end: run.end, seed: run.seed };
  return { end: run.end, seed: run.seed, ids: run.ids,
    delivered: Object.values(run.executed).map((o) => o?.cachedsearch_delivery?.[0]).find(Boolean) ?? null };
}

// Shows the graph inside the subgraph node `id` (or the top level for null), every node in view.
async function showGraph(id) {
  await page.evaluate((id) => {
    const canvas = window.app.canvas;
    canvas.setGraph(window.app.graph);
    if (id !== null) {
      const node = window.csAll().find((entry) => entry.id === id).node;
      canvas.openSubgraph(node.subgraph, node);
    }
    const nodes = canvas.graph.nodes;
    const left = Math.min(...nodes.map((n) => n.pos[0])) - 40;
    const top = Math.min(...nodes.map((n) => n.pos[1])) - 100;
    const right = Math.max(...nodes.map((n) => n.pos[0] + n.size[0])) + 40;
    const bottom = Math.max(...nodes.map((n) => n.pos[1] + n.size[1])) + 400;
    const rect = canvas.canvas.getBoundingClientRect();
    const scale = Math.min((rect.width - 120) / (right - left), (rect.height - 180) / (bottom - top), 1);
    canvas.ds.scale = scale;
    canvas.ds.offset[0] = 80 / scale - left;
    canvas.ds.offset[1] = 120 / scale - top;
    canvas.setDirty(true, true);
  }, id);
  await settled(page, `the graph ${id ?? "top level"}`);
}

// The top-level graph at 100 % with the subgraph node at its top left (what an artist sees of the workflow).
async function zoomToSubgraphNode() {
  await page.evaluate(() => {
    const canvas = window.app.canvas;
    canvas.setGraph(window.app.graph);
    const node = canvas.graph.nodes.find((n) => n.isSubgraphNode?.());
    canvas.ds.scale = 1;
    canvas.ds.offset[0] = 80 - node.pos[0];
    canvas.ds.offset[1] = 160 - node.pos[1]; // below the breadcrumbs newer frontends draw over the canvas
    canvas.setDirty(true, true);
  });
  await settled(page, "the view on the subgraph node");
}

const panelText = (type) => page.evaluate((type) => window.csPanel(type)?.textContent ?? null, type);
const rowsOf = (type) => page.evaluate((type) => [...(window.csPanel(type)?.querySelectorAll("tr.candidate") ?? [])]
  .map((row) => ({ candidate: Number(row.dataset.candidate), seed: Number(row.dataset.seed),
    winner: row.classList.contains("winner") })), type);
const queue = () => page.evaluate(() => window.app.queuePrompt(0, 1));
const shot = (suffix) => page.screenshot({ path: config.screenshot.replace(/\.png$/, `_${suffix}.png`) });

try {
  Object.assign(result, await openWorkflow(page, url));
  await page.evaluate(HELPERS);
  for (const [name, path] of Object.entries(config.prompts)) {
    const missing = await loadWorkflow(path);
    result.prompts[name] = { missing, prompt: await queuedGraph() };
  }

  warnings.length = 0;
  result.missing = await loadWorkflow(config.tiny_workflow);
  result.loadWarnings = [...warnings];
  const outer = await page.evaluate(() => String(window.app.graph.nodes.find((n) => n.isSubgraphNode?.()).id));
  result.subgraphNode = outer;
  await zoomToSubgraphNode();
  await shot("loaded");
  result.firstRun = await nextRun(queue);
  await showGraph(outer);
  result.framesLoaded = await loadedFrames(page, "CachedSearchVerifier");
  result.rows = await rowsOf("CachedSearchVerifier");
  result.samplerPanel = await panelText("CachedSearchSampler");
  result.firstDelivery = await panelText("CachedSearchRecommit");
  await shot("inside");
  // "Commit this" on a draft the verifier did not choose
  const target = result.rows.find((row) => !row.winner);
  result.commitTarget = target ?? null;
  if (target) {
    result.commit = await nextRun(() => page.evaluate((candidate) => window.csPanel("CachedSearchVerifier")
      .querySelector(`tr.candidate[data-candidate="${candidate}"] button.cachedsearch-pick-commit`).click(),
    target.candidate), 300000).catch((error) => ({ end: `no run: ${error.message.split("\n")[0]}` }));
    result.commitDelivery = await panelText("CachedSearchRecommit");
    await shot("committed");
  }
  // from the top level: what the subgraph node shows of the search inside; queued again, a fresh seed range
  await zoomToSubgraphNode();
  result.outside = await page.evaluate((id) => (window.csAll().find((entry) => entry.id === id).node.widgets ?? [])
    .filter((w) => w.element).map((w) => w.element.textContent).join(" "), outer);
  await shot("outside");
  result.secondRun = await nextRun(queue);
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
