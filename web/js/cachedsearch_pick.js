// The artist's pick: "Commit this" / "Keep this" on a draft queues the exact prompt that made the drafts again,
// with only the Recommit's pick, pick_among and mode changed, so ComfyUI's cache serves the search and the
// verifier and only the Recommit runs. A Recommit that waits for a pick (wait_for_pick) is answered through
// POST /cachedsearch/pick instead. Public API only: api.fetchApi, api events, the graph's nodes.
import { api } from "../../../scripts/api.js";

const RECOMMIT = "CachedSearchRecommit";
export const AWAITING_PICK_EVENT = "cachedsearch.awaiting_pick";

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

// The wait (if any) of run `promptId`, of one of the Recommit nodes `recommitIds` when given.
export function waitFor(promptId, recommitIds) {
  for (const wait of waiting.values()) {
    if (wait.prompt_id === promptId && (!recommitIds || recommitIds.includes(wait.node))) return wait;
  }
  return undefined;
}

// A waiting Recommit of another run whose search is the drafts' search (same node and inputs upstream): a run
// that reused these drafts from ComfyUI's cache and waits while the panels still show the run that made them
// (ComfyUI resends a reused node's results only when the run ends).
async function waitOnSameSearch(prompt, sampler) {
  const wanted = upstreamForm(prompt, sampler);
  for (const wait of waiting.values()) {
    const waitingPrompt = (await historyEntry(wait.prompt_id))?.prompt?.[2];
    const waitingSampler = waitingPrompt && samplerOf(waitingPrompt, wait.node);
    if (waitingSampler && waitingPrompt[waitingSampler] && upstreamForm(waitingPrompt, waitingSampler) === wanted) {
      return wait;
    }
  }
  return undefined;
}

// A run as the server's history stores it ({prompt: [number, id, prompt, extra_data, outputs]}), or, while it
// still runs or waits in the queue, its queue item in the same form: a pick during a run queues behind it.
async function historyEntry(promptId) {
  if (!promptId) return undefined;
  const response = await api.fetchApi(`/history/${encodeURIComponent(promptId)}`);
  const entry = response.ok ? (await response.json())[promptId] : undefined;
  if (entry) return entry;
  const queue = await api.fetchApi("/queue");
  if (!queue.ok) return undefined;
  const { queue_running: running = [], queue_pending: pending = [] } = await queue.json();
  const item = [...running, ...pending].find((queued) => queued[1] === promptId);
  return item ? { prompt: item } : undefined;
}

// Recommit nodes of an API prompt whose candidates come from the sampler `samplerId`.
export function recommitsOf(prompt, samplerId) {
  return Object.entries(prompt).filter(([, node]) => node.class_type === RECOMMIT &&
    Array.isArray(node.inputs?.candidates) && String(node.inputs.candidates[0]) === String(samplerId)).map(([id]) => id);
}

// Canonical form of a node and everything upstream of it in an API prompt: equal forms mean ComfyUI reuses
// one cached result for both.
export function upstreamForm(prompt, id, memo = new Map()) {
  if (memo.has(id)) return memo.get(id);
  const node = prompt[id];
  const inputs = Object.keys(node?.inputs ?? {}).sort().map((name) => {
    const value = node.inputs[name];
    return [name, Array.isArray(value) ? [upstreamForm(prompt, String(value[0]), memo), value[1]] : value];
  });
  const form = JSON.stringify([node?.class_type, inputs]);
  memo.set(id, form);
  return form;
}

// The sampler whose candidates the node `nodeId` of `prompt` shows (itself for a sampler).
export function samplerOf(prompt, nodeId) {
  const node = prompt[nodeId];
  if (!node) return undefined;
  const candidates = node.inputs?.candidates;
  return Array.isArray(candidates) ? samplerOf(prompt, String(candidates[0])) ?? String(candidates[0]) : String(nodeId);
}

// What a pick on the drafts of run `promptId` costs. ComfyUI's default cache holds the results of its newest
// run only: drafts that run made again are served from it, an earlier search's are drafted again (same seeds,
// same drafts) before the commit.
export async function pickCost(promptId, nodeId) {
  if (waitFor(promptId)) return { cached: true, text: "this run is waiting for your pick: it costs nothing more" };
  try {
    const newestResponse = await api.fetchApi("/history?max_items=1");
    const newest = Object.values(newestResponse.ok ? await newestResponse.json() : {}).at(-1)?.prompt?.[2];
    const source = (await historyEntry(promptId))?.prompt?.[2];
    const sampler = source && samplerOf(source, String(nodeId));
    if (newest && sampler && source[sampler]) {
      const wanted = upstreamForm(source, sampler);
      const memo = new Map();
      if (Object.keys(newest).some((id) => upstreamForm(newest, id, memo) === wanted)) {
        return { cached: true, text: "a pick costs one commit: ComfyUI still holds these drafts" };
      }
    }
  } catch (error) {
    console.warn("CachedSearch: could not read the server's history", error);
  }
  return { cached: false, text: "a pick here drafts this search again (same seeds, same drafts), then commits" };
}

const clientId = () => api.clientId ?? api.initialClientId ?? sessionStorage.getItem("clientId") ?? undefined;

// Queues the pick of candidate `candidate` (1-based) from the drafts that node `source.nodeId` showed for run
// `source.promptId`; source.among: the search's number of candidates. Returns a line saying what happened.
export async function queuePick(source, candidate, mode) {
  const entry = await historyEntry(source.promptId);
  const prompt = structuredClone(entry?.prompt?.[2] ?? {});
  const sampler = samplerOf(prompt, String(source.nodeId));
  const recommits = sampler ? recommitsOf(prompt, sampler) : [];
  const wait = waitFor(source.promptId, recommits.length ? recommits : undefined) ??
    (sampler && prompt[sampler] ? await waitOnSameSearch(prompt, sampler) : undefined);
  if (wait) {
    const response = await api.fetchApi("/cachedsearch/pick", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt_id: wait.prompt_id, node: wait.node, candidate, mode }),
    });
    if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error ?? `the server answered ${response.status}`);
    return `sent: ${mode} candidate ${candidate} to the waiting Recommit`;
  }
  if (!entry) {
    throw new Error("the server no longer has the run that made these drafts (restarted or history cleared): " +
      "queue the graph again with its seed set to candidate 1's and pick from the new drafts");
  }
  if (recommits.length === 0) throw new Error("no Recommit node takes these candidates: connect one to pick a draft");
  for (const id of recommits) Object.assign(prompt[id].inputs, { pick: candidate, pick_among: source.among, mode });
  const response = await api.fetchApi("/prompt", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ client_id: clientId(), prompt, extra_data: entry.prompt?.[3] ?? {} }),
  });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const reason = answer.error?.message ?? answer.error ?? `the server answered ${response.status}`;
    throw new Error(typeof reason === "string" ? reason : JSON.stringify(reason));
  }
  return `queued: ${mode} candidate ${candidate}`;
}

// The earlier runs of the graph node `nodeId` (same class) the server's history holds, newest first:
// [{promptId, output}] with each run's UI payload for that node.
export async function earlierRuns(nodeId, classType) {
  const response = await api.fetchApi("/history?max_items=64");
  if (!response.ok) return [];
  const runs = [];
  for (const [promptId, entry] of Object.entries(await response.json()).reverse()) {
    const output = entry.outputs?.[nodeId];
    if (output && entry.prompt?.[2]?.[nodeId]?.class_type === classType) runs.push({ promptId, output });
  }
  return runs;
}
