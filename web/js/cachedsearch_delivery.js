// Recommit's panel: the delivered seed, who chose it, its cost with the commit against full best-of-N (the cost
// payload's ratios) and the budget's prediction; while the Recommit waits for the artist, the wait instead.
// Exports only: ComfyUI loads every script under web/ as an extension, and this one registers nothing.
import { element, wrappedLines } from "./cachedsearch_dom.js";
import { executionIdOf } from "./cachedsearch_graph_nodes.js";
import { FONT, LINE_HEIGHT, PANEL, show, STORED } from "./cachedsearch_panel.js";
import { ANSWERS_THE_WAIT, queuePick, waiting } from "./cachedsearch_pick.js";
import { budgetLine, CALLS_TITLE, chooserLine, draftedCost, overFullText } from "./cachedsearch_rows.js";

const percent = (share) => `${(100 * share).toFixed(1)}%`;

// The search's cost with this delivery: its calls whichever run computed the drafts (a pick that read them back
// from disk still shows what the search cost), with the commit's beside them; the seconds are this run's only, so
// they show only where this run drafted everything.
function costText(delivery, given) {
  const ratio = given.drafted_ratio_with_commit ?? given.calls_ratio_with_commit;
  const seconds = given.drafted_by_this_run === false ? undefined : given.seconds_ratio_with_commit;
  const time = typeof seconds === "number" ? percent(seconds) : "";
  const best = `full best-of-${delivery.num_candidates}`;
  if (typeof ratio !== "number") return time ? `search cost ${time} of ${best} in time` : "no commit: drafts only";
  const drafts = draftedCost(given).ratio;
  const parts = typeof drafts === "number" && typeof given.commit_ratio === "number" && !given.kept
    ? ` (the drafts ${percent(drafts)}, this commit ${percent(given.commit_ratio)})` : "";
  return `search cost ${percent(ratio)} of ${best}'s transformer calls${parts}${given.kept ? ", no commit" : ""}` +
    (time ? ` (${time} in time measured on this machine)` : "");
}

// A two-stage pipeline (LTX-2.3's upsample + refine after the Recommit): the second stage runs once, for the winner,
// where running the whole pipeline for every candidate pays it N times.
function secondStageText(given) {
  if (typeof given.second_stage_calls !== "number") return "";
  return ` Second stage once, for the winner: ${given.second_stage_calls} calls; the search with it ` +
    `${given.pipeline_calls} against ${given.full_pipeline_calls} for the whole pipeline run for every candidate ` +
    `(${percent(given.pipeline_ratio)}).`;
}

export function renderDelivery(node, output) {
  const delivery = output.cachedsearch_delivery?.[0];
  if (!delivery) return false;
  // The Sampler's cost model with this delivery: transformer calls with the commit first (exact, the Sampler's
  // figure), then the time measured on this machine. A run saved by an older CachedSearch carries calls_ratio and
  // relative_cost (time) on the delivery itself, or the time only.
  const given = delivery.cost ??
    { calls_ratio_with_commit: delivery.calls_ratio, seconds_ratio_with_commit: delivery.relative_cost };
  const budget = budgetLine(delivery.budget, delivery.budget?.measured_commit);
  const chooser = chooserLine(delivery);
  const text = `delivered seed ${delivery.seed} (candidate ${delivery.candidate}, ${delivery.mode})` +
    `${chooser ? `; ${chooser}` : ""}; ${costText(delivery, given)}${budget ? `; ${budget}` : ""}.` +
    secondStageText(given) + overFullText(given);
  // The delivered video itself shows where the workflow decodes and saves it (its Save Video node).
  const content = element("div");
  const summary = element("div", text, "cachedsearch-summary");
  summary.title = CALLS_TITLE;
  content.append(summary);
  show(node, content, (width) => 8 + LINE_HEIGHT * wrappedLines(text, width, FONT));
  return true;
}

const NOTHING_DELIVERED = "Nothing delivered in this run: it was cancelled or stopped before the Recommit " +
  "delivered. Commit or Keep a draft to deliver it.";

// A Recommit whose run ended without a delivery (Cancel while it waited, an error before it, or a run in the history
// that was stopped): says so, instead of an earlier run's delivery beside this run's drafts; `text`: what to say
// instead (cachedsearch_stopped.js: a run stopped before its search finished has no drafts to pick from).
export function showNoDelivery(node, text = NOTHING_DELIVERED) {
  const content = element("div");
  content.append(element("div", text, "cachedsearch-summary cachedsearch-no-delivery"));
  show(node, content, (width) => 8 + LINE_HEIGHT * wrappedLines(text, width, FONT));
}

// While a Recommit waits for the artist, its panel shows only that (its last delivery was another run's) and
// offers the verifier's choice; the drafts' own Commit/Keep buttons answer the wait too. When the wait ends without
// a delivery (Cancel), the panel says nothing was delivered (the drafts shown are that run's), and so does the
// saved workflow; a delivery that ends the wait replaces it at once.
export function showWaiting(node) {
  const id = executionIdOf(node);
  const wait = [...waiting.values()].find((entry) => entry.node === id);
  const panel = node.widgets?.find((w) => w.name === PANEL)?.element;
  if (!wait) {
    if (panel?.querySelector(".cachedsearch-wait")) {
      delete node.properties?.[STORED];
      showNoDelivery(node);
    }
    return;
  }
  const banner = element("div", undefined, "cachedsearch-line cachedsearch-wait");
  const preselected = wait.preselected ? `the verifier's choice is candidate ${wait.preselected}` : "no verifier choice";
  const text = `Waiting for your pick among ${wait.candidates} drafts (${preselected}): press Commit or Keep on a ` +
    "draft, or Cancel to stop. ";
  banner.append(text);
  if (wait.preselected) {
    const deliver = element("button", `commit candidate ${wait.preselected}`, "cachedsearch-wait-commit");
    deliver.title = `Deliver candidate ${wait.preselected} at full compute: ${ANSWERS_THE_WAIT}`;
    deliver.addEventListener("click", () => queuePick({ promptId: wait.prompt_id, nodeId: id,
      among: wait.candidates }, wait.preselected, "commit").catch((error) => banner.append(` ${error.message}`)));
    banner.append(deliver);
  }
  const content = element("div");
  content.append(banner);
  show(node, content, (width) => 8 + LINE_HEIGHT * (wrappedLines(text, width, FONT) + 1));
}
