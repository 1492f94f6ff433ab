// The artist's pick: "Commit this" / "Keep this" on a draft queues the exact prompt that made the drafts again,
// with only the Recommit's pick, pick_among and mode changed, so ComfyUI's cache can serve the search and the
// verifier and only the Recommit runs. A Recommit that waits for a pick (wait_for_pick) is answered through
// POST /cachedsearch/pick instead. Public API only: api.fetchApi, api events, api.clientId. Exports only: ComfyUI
// loads every script under web/ as an extension, and this one registers nothing.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { cachedNodes, onRunStarted } from "./cachedsearch_cached_runs.js";
import { findRun, recentRuns, samplerOf } from "./cachedsearch_history.js";

const RECOMMIT = "CachedSearchRecommit";
export const AWAITING_PICK_EVENT = "cachedsearch.awaiting_pick";
// What a pick does while a run waits for one (the pick buttons' and the wait banner's tooltips end with it).
export const ANSWERS_THE_WAIT = "answers the run that waits for your pick";

// Recommit nodes waiting for a pick, by "prompt_id/node": {prompt_id, node, candidates, preselected}.
export const waiting = new Map();
const listeners = new Set();

export function onWaitingChanged(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function waitingChanged() {
  for (const listener of listeners) {
    try {
      listener();
    } catch (error) {
      console.warn("CachedSearch: could not update the wait-for-pick view", error);
    }
  }
}

api.addEventListener(AWAITING_PICK_EVENT, ({ detail }) => {
  if (!detail?.prompt_id || detail.node === undefined) return;
  waiting.set(`${detail.prompt_id}/${detail.node}`, { ...detail, node: String(detail.node) });
  waitingChanged();
});

function endWaits({ detail }) {
  let changed = false;
  for (const [key, wait] of waiting) {
    if (wait.prompt_id === detail?.prompt_id) changed = waiting.delete(key) || changed;
  }
  if (changed) waitingChanged();
}
for (const event of ["execution_success", "execution_error", "execution_interrupted"]) api.addEventListener(event, endWaits);
api.addEventListener("executed", ({ detail }) => {
  if (waiting.delete(`${detail?.prompt_id}/${detail?.display_node ?? detail?.node}`)) waitingChanged();
});

// Waits already open when the page (re)loads; a server without the route (an older CachedSearch) has none.
export async function loadWaiting() {
  try {
    const response = await api.fetchApi("/cachedsearch/pick");
    if (!response.ok) return;
    for (const wait of (await response.json()).waiting ?? []) waiting.set(`${wait.prompt_id}/${wait.node}`, { ...wait, node: String(wait.node) });
    waitingChanged();
  } catch {
    // no route: nothing waits
  }
}

// The wait a pick on drafts answers: that of their run `promptId` (of one of `recommitIds` when given), or, where
// the panel shows its node's newest drafts (`samplerId`: the node that drafted them), that of a run which took
// those very drafts from ComfyUI's cache (its execution_cached named the sampler) and waits while the panels still
// show the run that made them (ComfyUI resends a reused node's results only when the run ends).
export function waitFor(promptId, recommitIds, samplerId) {
  const wanted = (wait) => !recommitIds || recommitIds.includes(wait.node);
  for (const wait of waiting.values()) {
    if (wait.prompt_id === promptId && wanted(wait)) return wait;
  }
  if (samplerId === undefined) return undefined;
  for (const wait of waiting.values()) {
    if (wanted(wait) && cachedNodes(wait.prompt_id)?.has(String(samplerId))) return wait;
  }
  return undefined;
}

// Whether run `promptId` took node `nodeId` from ComfyUI's cache, once it starts (its execution_cached event).
export function reusedInRun(promptId, nodeId) {
  return new Promise((resolve) => {
    const started = cachedNodes(promptId);
    if (started) {
      resolve(started.has(String(nodeId)));
      return;
    }
    const stop = onRunStarted((startedId) => {
      if (startedId !== promptId) return;
      stop();
      resolve(cachedNodes(promptId).has(String(nodeId)));
    });
  });
}

// Recommit nodes of an API prompt whose candidates come from the sampler `samplerId`.
export function recommitsOf(prompt, samplerId) {
  return Object.entries(prompt).filter(([, node]) => node.class_type === RECOMMIT &&
    Array.isArray(node.inputs?.candidates) && String(node.inputs.candidates[0]) === String(samplerId)).map(([id]) => id);
}

async function answerWait(wait, candidate, mode) {
  const response = await api.fetchApi("/cachedsearch/pick", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ prompt_id: wait.prompt_id, node: wait.node, candidate, mode }),
  });
  if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error ?? `the server answered ${response.status}`);
  return { text: `sent: ${mode} candidate ${candidate} to the waiting Recommit` };
}

// Queues the pick of candidate `candidate` (1-based) from the drafts that node `source.nodeId` showed for run
// `source.promptId`; source.among: the search's number of candidates; source.firstSeed: candidate 1's seed;
// source.samplerId: the graph's sampler node behind them where the panel shows its newest drafts. Returns {text:
// what happened, promptId and samplerId of the run it queued (none where it answered a wait)}.
export async function queuePick(source, candidate, mode) {
  const run = await findRun(source.promptId);
  const prompt = structuredClone(run?.prompt ?? {});
  const sampler = samplerOf(prompt, String(source.nodeId));
  const recommits = sampler ? recommitsOf(prompt, sampler) : [];
  const wait = waitFor(source.promptId, recommits.length ? recommits : undefined, source.samplerId);
  if (wait) return answerWait(wait, candidate, mode);
  if (!run) return queueFromGraph(source, candidate, mode);
  if (recommits.length === 0) throw new Error(NO_RECOMMIT);
  for (const id of recommits) Object.assign(prompt[id].inputs, { pick: candidate, pick_among: source.among, mode });
  return queuePrompt(prompt, run.extraData, candidate, mode, sampler);
}

const NO_RECOMMIT = "no Recommit node takes these candidates: connect one to pick a draft";

// After a restart (or a cleared history) the server no longer has the run that made the drafts, but the graph is in
// the tab and the Sampler saved the drafts on disk: the tab's graph is queued with the Sampler's seed and width set
// to those of the drafts shown (source.firstSeed: candidate 1's, source.among) and the Recommit's pick, so the
// Sampler reads its drafts back (where the graph's set-up is unchanged) and only the commit runs.
async function queueFromGraph(source, candidate, mode) {
  const { output: prompt, workflow } = await app.graphToPrompt();
  const sampler = samplerOf(prompt, String(source.nodeId));
  const recommits = sampler ? recommitsOf(prompt, sampler) : [];
  if (recommits.length === 0) throw new Error(NO_RECOMMIT);
  const inputs = prompt[sampler].inputs;
  if (typeof inputs.seed !== "number" || typeof source.firstSeed !== "number") {
    throw new Error("the server no longer has the run that made these drafts and the Sampler's seed comes from " +
      `another node: set it to candidate 1's seed${source.firstSeed === undefined ? "" : ` (${source.firstSeed})`} ` +
      "and queue the graph to pick from its drafts");
  }
  inputs.seed = source.firstSeed;
  if (typeof inputs.num_candidates === "number") inputs.num_candidates = source.among;
  for (const id of recommits) Object.assign(prompt[id].inputs, { pick: candidate, pick_among: source.among, mode });
  return queuePrompt(prompt, { extra_pnginfo: { workflow } }, candidate, mode, sampler);
}

async function queuePrompt(prompt, extraData, candidate, mode, sampler) {
  const response = await api.fetchApi("/prompt", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_id: api.clientId, prompt, extra_data: extraData }),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const reason = answer.error?.message ?? answer.error ?? `the server answered ${response.status}`;
    throw new Error(typeof reason === "string" ? reason : JSON.stringify(reason));
  }
  return { text: `queued: ${mode} candidate ${candidate}`, promptId: answer.prompt_id, samplerId: sampler };
}

// The runs of workflow `workflowId` (the graph's id, which a queued prompt carries in its saved workflow; every
// run when the frontend gives graphs no id) in which the graph node `nodeId` (same class) showed results, newest
// first, as the server's history holds them: [{promptId, outputs, stopped}] with every node's UI payload of that run
// and whether it was cancelled or failed.
export async function earlierRuns(nodeId, classType, workflowId) {
  return (await recentRuns(64)).filter((run) =>
    (!workflowId || run.extraData.extra_pnginfo?.workflow?.id === workflowId) && run.outputs[nodeId] &&
    run.prompt[nodeId]?.class_type === classType)
    .map(({ promptId, outputs, stopped }) => ({ promptId, outputs, stopped }));
}
