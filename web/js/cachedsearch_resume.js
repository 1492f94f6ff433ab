// Resuming a search that was cancelled or failed before its sampler finished. Every draft a search finishes is
// saved on disk, but with the seed's default control (randomize) the next Run searches a fresh range and reuses
// none of them. So the sampler shows, under its panel, one button that puts its seed back to the stopped run's seed
// and queues the graph with the seed's control set to "fixed" for that queue (put back after): the saved drafts are
// read back and only the missing ones computed. The offer goes once another run starts.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { element, ensureStyle, fitNode, panelElement, wrappedLines } from "./cachedsearch_dom.js";
import { widgetsSetting, workflowNodes } from "./cachedsearch_graph_nodes.js";
import { findRun } from "./cachedsearch_history.js";

const SAMPLERS = ["CachedSearchSampler", "CachedSearchSamplerAdvanced", "CachedSearchSamplerExperts"];
const WIDGET = "cachedsearch_resume";
const FONT = "11px sans-serif";
const LINE_HEIGHT = 15;
const STYLE = `
.cachedsearch-resume { font: ${FONT}; color: var(--fg-color, #ddd); line-height: ${LINE_HEIGHT}px;
  overflow-wrap: anywhere; }
.cachedsearch-resume button { font: 11px sans-serif; padding: 1px 6px; margin-right: 6px; cursor: pointer; }`;

// The workflow's samplers, subgraphs' included, as [{node, id}] (id: the execution id a prompt gives it).
const samplers = () => workflowNodes().filter(({ node }) => SAMPLERS.includes(node.comfyClass ?? node.type));

// The stopped run's search as its prompt held it: {seed, candidates}; undefined when the seed came from a link.
function stoppedSearch(prompt, id) {
  const inputs = prompt[id]?.inputs;
  if (!Number.isInteger(inputs?.seed)) return undefined;
  return { seed: inputs.seed, candidates: inputs.num_candidates };
}

function seedWidgets(node) {
  const seed = node.widgets?.find((widget) => widget.name === "seed");
  const control = seed?.linkedWidgets?.find((widget) => widget.name === "control_after_generate") ??
    node.widgets?.find((widget) => widget.name === "control_after_generate");
  return { seed, control };
}

// Queues the graph with node's seed at `seed`, its control "fixed" for this queue only.
async function resume(node, offer, button) {
  const { control } = seedWidgets(node);
  button.disabled = true;
  for (const widget of widgetsSetting(node, "seed")) { // inside a subgraph, a promoted seed too
    widget.value = offer.seed;
    widget.callback?.(offer.seed);
  }
  const before = control?.value;
  if (control) control.value = "fixed";
  try {
    await app.queuePrompt(0, 1);
  } finally {
    if (control) control.value = before;
    node.setDirtyCanvas?.(true, true);
  }
}

function offerText(offer) {
  const candidates = Number.isInteger(offer.candidates) ? `, ${offer.candidates} seeds` : "";
  return `The last search was ${offer.failed ? "stopped by an error" : "cancelled"} before its drafts were done ` +
    `(seed ${offer.seed}${candidates}). Resume re-queues it with that seed fixed: the drafts it saved are reused, ` +
    "only the missing ones computed.";
}

function showOffer(node, offer) {
  ensureStyle("cachedsearch-resume-style", STYLE);
  const panel = panelElement(node, WIDGET, "cachedsearch-resume", (line, width) =>
    line.firstChild ? LINE_HEIGHT * wrappedLines(`resume ${line.dataset.text}`, width, FONT) : 0);
  const text = offerText(offer);
  const button = element("button", "resume", "cachedsearch-resume-button");
  button.title = `Set seed to ${offer.seed} and queue the graph (the seed's control is "fixed" for this queue)`;
  button.addEventListener("click", () => resume(node, offer, button).catch((error) => {
    panel.lastChild.textContent = `Could not resume: ${error.message}`;
    button.disabled = false;
  }));
  panel.dataset.text = text;
  panel.dataset.seed = String(offer.seed);
  panel.replaceChildren(button, element("span", text));
  fitNode(node);
}

function withdraw(node) {
  const widget = node.widgets?.find((candidate) => candidate.name === WIDGET);
  if (!widget) return;
  node.removeWidget(widget);
  node.setDirtyCanvas?.(true, true);
}

// A run that ended cancelled or failed: each sampler of this graph that it held and did not finish offers to resume.
async function runStopped({ detail }, failed) {
  const finished = new Set((detail?.executed ?? []).map(String));
  const waiting = samplers().filter(({ id }) => !finished.has(id));
  if (!detail?.prompt_id || waiting.length === 0) return;
  const run = await findRun(detail.prompt_id);
  for (const { node, id } of waiting) {
    const offer = run && stoppedSearch(run.prompt, id);
    if (offer && run.prompt[id].class_type === (node.comfyClass ?? node.type) && seedWidgets(node).seed) {
      showOffer(node, { ...offer, failed, promptId: detail.prompt_id });
    }
  }
}

api.addEventListener("execution_interrupted", (event) => runStopped(event, false)
  .catch((error) => console.warn("CachedSearch: could not offer to resume the search", error)));
api.addEventListener("execution_error", (event) => runStopped(event, true)
  .catch((error) => console.warn("CachedSearch: could not offer to resume the search", error)));
api.addEventListener("execution_start", () => {
  for (const { node } of samplers()) withdraw(node);
});
