// The pick on a panel: the Commit and Keep buttons (in the table and in the large view), the note under the table
// saying what a pick costs in the search's own numbers, and what happened once a pick ran. Before the click the
// note says only what is known then: whether a run waits for the pick, what a commit and a search cost; after it,
// whether ComfyUI reused the drafts (the run's execution_cached).
// Exports only: ComfyUI loads every script under web/ as an extension, and this one registers nothing.
import { api } from "../../../scripts/api.js";
import { element } from "./cachedsearch_dom.js";
import { executionIdOf, workflowNodes } from "./cachedsearch_graph_nodes.js";
import { PANEL, STORED, STORED_PROMPT } from "./cachedsearch_panel.js";
import { showLarge } from "./cachedsearch_player.js";
import { ANSWERS_THE_WAIT, queuePick, reusedInRun, waitFor } from "./cachedsearch_pick.js";
import { describe, draftedCost, framesOf } from "./cachedsearch_rows.js";

export const SAVED_DRAFTS = "These drafts come from a saved workflow: queue it to pick from them.";

// The graph's sampler node whose drafts the node `node` shows (itself for a sampler), through its candidates input.
function graphSampler(node) {
  const slot = node?.findInputSlot?.("candidates") ?? -1;
  if (slot < 0) return node;
  // a node the frontend configures before adding it to a graph (converting to a subgraph) has no links to follow
  const upstream = node.graph ? node.getInputNode?.(slot) : undefined;
  return upstream ? graphSampler(upstream) : undefined;
}

// Candidate 1's seed (a pick after a restart queues the graph from it); undefined when no row says it.
function firstSeed(rows) {
  const seed = Number(rows.find((row) => row.candidate === 1)?.seed);
  return Number.isSafeInteger(seed) ? seed : undefined;
}

// Where a pick on this panel goes: {promptId, nodeId, among, samplerId (where the panel shows its newest drafts)};
// undefined when the node has not run in this server's history.
function pickSource(node, rows) {
  const promptId = node.cachedsearchView?.promptId ?? node.properties?.[STORED_PROMPT];
  if (!promptId) return undefined;
  const sampler = node.cachedsearchView ? undefined : graphSampler(node);
  return { promptId, nodeId: executionIdOf(node), among: rows.length, samplerId: sampler && executionIdOf(sampler),
    firstSeed: firstSeed(rows) };
}

// "waiting" where a click answers a run that waits for the pick, else "queue": the click queues a run.
function pickState(source) {
  return source && waitFor(source.promptId, undefined, source.samplerId) ? "waiting" : "queue";
}

// The search's cachedsearch_cost as the run the panel shows left it (undefined: none known).
function searchCost(node) {
  const sampler = graphSampler(node);
  const outputs = node.cachedsearchView?.runs[node.cachedsearchView.index].outputs;
  const output = outputs ? outputs[sampler && executionIdOf(sampler)] : sampler?.properties?.[STORED];
  return output?.cachedsearch_cost?.[0];
}

// A pick button's tooltip: what the click does now.
function pickTitle(mode, row, state) {
  const what = mode === "keep" ? `the draft of ${describe(row)} as drafted` : `${describe(row)} at full compute`;
  return state === "waiting" ? `Deliver ${what}: ${ANSWERS_THE_WAIT}`
    : `Queue the run that made these drafts again to deliver ${what} (the note under the table says what it costs)`;
}

export function pickActions(node, rows, row, status) {
  if (typeof row.candidate !== "number") return []; // an older payload's pruned row: no number to pick by
  const state = pickState(pickSource(node, rows));
  const actions = [{ text: "Commit this", mode: "commit", className: "cachedsearch-pick-commit",
    title: pickTitle("commit", row, state) }];
  if (!row.pruned) {
    actions.push({ text: "Keep this", mode: "keep", className: "cachedsearch-pick-keep",
      title: pickTitle("keep", row, state) });
  }
  return actions.map((action) => ({ ...action, run: () => pick(node, rows, row, action.mode, status) }));
}

// The status line under a panel's table, showing what the last pick from it did while the panel shows that run.
export function pickStatus(node) {
  const status = element("div", "", "cachedsearch-line cachedsearch-status");
  const last = node.cachedsearchPicked;
  if (last && last.promptId === node.properties?.[STORED_PROMPT] && !node.cachedsearchView) {
    status.textContent = last.text;
    if (last.outcome) status.dataset.outcome = last.outcome;
  }
  return status;
}

// What a pick did is said until another run starts.
api.addEventListener("execution_start", ({ detail }) => {
  for (const { node } of workflowNodes()) {
    if (node.cachedsearchPicked && node.cachedsearchPicked.promptId !== detail?.prompt_id) delete node.cachedsearchPicked;
  }
});

// How run `promptId` ends: "done", "cancelled" or "failed".
function runEnd(promptId) {
  const words = { execution_success: "done", execution_interrupted: "cancelled", execution_error: "failed" };
  return new Promise((resolve) => {
    const ended = (event) => {
      if (event.detail?.prompt_id !== promptId) return;
      for (const name of Object.keys(words)) api.removeEventListener(name, ended);
      resolve(words[event.type]);
    };
    for (const name of Object.keys(words)) api.addEventListener(name, ended);
  });
}

async function pick(node, rows, row, mode, status) {
  const source = pickSource(node, rows);
  const say = (text, outcome) => {
    if (!status) return;
    status.textContent = text;
    if (outcome) status.dataset.outcome = outcome;
  };
  if (!source) {
    say(SAVED_DRAFTS);
    return;
  }
  say(`${mode === "keep" ? "keeping" : "committing"} ${describe(row)}…`);
  try {
    const queued = await queuePick(source, row.candidate, mode);
    const text = `${queued.text} (seed ${row.seed})`;
    say(text);
    if (!queued.promptId) return;
    const ended = runEnd(queued.promptId);
    const picked = { promptId: queued.promptId, text };
    node.cachedsearchPicked = picked;
    const reused = await reusedInRun(queued.promptId, queued.samplerId);
    picked.outcome = reused ? "reused" : "drafted again";
    const dropped = searchCost(node)?.drafts_saved ? "ComfyUI no longer held these drafts; the Sampler reads them " +
      "back from disk" : "ComfyUI no longer held these drafts, so the pick drafts the search again first";
    // the line follows the pick's run: queued, running, then how it ended
    const how = reused ? "ComfyUI reused these drafts" : dropped;
    const what = `${mode} candidate ${row.candidate} (seed ${row.seed}): ${how}`;
    picked.text = `running: ${what}`;
    say(picked.text, picked.outcome);
    picked.text = `${await ended}: ${what}`;
    say(picked.text, picked.outcome);
    // the panel redrawn meanwhile (the pick's run) shows this pick's line in a new element
    const shown = node.widgets?.find((widget) => widget.name === PANEL)?.element?.querySelector(".cachedsearch-status");
    if (shown && shown !== status && shown.textContent && node.cachedsearchPicked === picked) {
      shown.textContent = picked.text;
    }
  } catch (error) {
    say(`Could not pick ${describe(row)}: ${error.message}`);
  }
}

export function enlarge(node, rows, row, status, what) {
  const frames = framesOf(row);
  if (frames.length === 0) return;
  showLarge(frames, `${describe(row)}${what ? `, ${what}` : ""}`, pickActions(node, rows, row, status));
}

// What a pick costs, in the search's own numbers (`cost`: its cachedsearch_cost; undefined: none known).
function pickNoteText(state, cost) {
  const calls = (count) => (typeof count === "number" && count > 0 ? ` (${count} transformer calls)` : "");
  const drafted = draftedCost(cost).calls; // the search's own drafting, whichever run computed it
  const commit = cost?.commit_free ? "commit costs nothing more (every draft already is full compute)"
    : `commit costs one full render${calls(cost?.rollout_calls)}`;
  if (state === "waiting") return `This run waits for your pick: ${commit}; keep costs nothing.`;
  if (cost?.drafts_saved) {
    return `A ${commit}; keep costs nothing. The drafts are saved on disk, so a pick never drafts them again` +
      `${calls(drafted)}.`;
  }
  return `A ${commit}; keep costs nothing. If ComfyUI no longer holds these drafts, a pick drafts this search ` +
    `again first${calls(drafted)}.`;
}

// One line under a table: what a pick costs, whether it answers a waiting run (data-state "waiting") or queues
// one ("queue").
export function pickNote(node, rows) {
  const note = element("div", SAVED_DRAFTS, "cachedsearch-line cachedsearch-pick-note cachedsearch-muted");
  const source = pickSource(node, rows);
  if (source) {
    note.dataset.state = pickState(source);
    note.textContent = pickNoteText(note.dataset.state, searchCost(node));
  }
  return note;
}
