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
// A run that just ended may be in neither for a moment (the server stores its history after it leaves the
// queue): asked again for a few seconds before it counts as gone.
async function historyEntry(promptId) {
  if (!promptId) return undefined;
  for (let attempt = 0; attempt < 10; attempt += 1) {
    const response = await api.fetchApi(`/history/${encodeURIComponent(promptId)}`);
    const entry = response.ok ? (await response.json())[promptId] : undefined;
    if (entry) return entry;
    const queue = await api.fetchApi("/queue");
    if (queue.ok) {
      const { queue_running: running = [], queue_pending: pending = [] } = await queue.json();
      const item = [...running, ...pending].find((queued) => queued[1] === promptId);
      if (item) return { prompt: item };
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return undefined;
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

// The API prompt ComfyUI will have run just before a pick queued now: its queue runs in order, so the last
// prompt queued (pending, else running), else the newest in its history.
async function promptBeforeNextRun() {
  const queue = await api.fetchApi("/queue");
  if (!queue.ok) throw new Error(`the server answered ${queue.status} for its queue`);
  const { queue_running: running = [], queue_pending: pending = [] } = await queue.json();
  const queued = [...running, ...pending].sort((a, b) => a[0] - b[0]).at(-1);
  if (queued) return queued[2];
  const newest = await api.fetchApi("/history?max_items=1");
  if (!newest.ok) throw new Error(`the server answered ${newest.status} for its history`);
  return Object.values(await newest.json()).at(-1)?.prompt?.[2];
}

let serverCache;

// Which results ComfyUI's cache keeps, from the server's command line and version: "none" (--cache-none),
// "newest" (the classic cache, ComfyUI 0.3's default: the newest prompt's results only) or "earlier" (an LRU or
// RAM-pressure cache, ComfyUI 0.33's default: earlier prompts' results too, while they fit).
function cacheKind() {
  serverCache ??= api.fetchApi("/system_stats").then(async (response) => {
    if (!response.ok) throw new Error(`the server answered ${response.status} for its system stats`);
    const { argv = [], comfyui_version: version = "" } = (await response.json()).system ?? {};
    if (argv.includes("--cache-none")) return "none";
    if (argv.includes("--cache-classic")) return "newest";
    if (argv.some((arg) => arg.startsWith("--cache-lru") || arg.startsWith("--cache-ram"))) return "earlier";
    return /^0\.3\.\d+/.test(version) ? "newest" : "earlier";
  });
  serverCache.catch(() => {
    serverCache = undefined; // asked again next time
  });
  return serverCache;
}

// What a pick on the drafts node `nodeId` showed for run `promptId` will reuse: {state, samplerId, cost}.
// state "waiting": a Recommit of this search waits for the pick; "held": ComfyUI will still hold these drafts
// when the pick runs; "maybe": its cache may still hold them (it keeps earlier results while they fit);
// "gone": it will not, the search is drafted again; "lost": the server no longer has that run, nothing can be
// picked from it; "unknown": the server did not say.
// cost: the search's cachedsearch_cost as that run stored it (undefined while the run has not finished).
export async function pickCost(promptId, nodeId) {
  try {
    const entry = await historyEntry(promptId);
    const source = entry?.prompt?.[2];
    if (!entry) return { state: "lost" };
    const samplerId = samplerOf(source, String(nodeId));
    if (!samplerId || !source[samplerId]) return { state: "unknown" };
    const found = { samplerId, cost: entry.outputs?.[samplerId]?.cachedsearch_cost?.[0] };
    if (waitFor(promptId) || await waitOnSameSearch(source, samplerId)) return { ...found, state: "waiting" };
    const kind = await cacheKind();
    if (kind === "none") return { ...found, state: "gone" };
    const before = await promptBeforeNextRun();
    const wanted = upstreamForm(source, samplerId);
    const memo = new Map();
    if (before && Object.keys(before).some((id) => upstreamForm(before, id, memo) === wanted)) {
      return { ...found, state: "held" };
    }
    return { ...found, state: kind === "earlier" ? "maybe" : "gone" };
  } catch (error) {
    console.warn("CachedSearch: could not read the server's queue, history or cache settings", error);
    return { state: "unknown" };
  }
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

// The runs of workflow `workflowId` (the graph's id, which a queued prompt carries in its saved workflow; every
// run when the frontend gives graphs no id) in which the graph node `nodeId` (same class) showed results, newest
// first, as the server's history holds them: [{promptId, outputs}] with every node's UI payload of that run.
export async function earlierRuns(nodeId, classType, workflowId) {
  const response = await api.fetchApi("/history?max_items=64");
  if (!response.ok) return [];
  const runs = [];
  for (const [promptId, entry] of Object.entries(await response.json()).reverse()) {
    const ofWorkflow = !workflowId || entry.prompt?.[3]?.extra_pnginfo?.workflow?.id === workflowId;
    if (ofWorkflow && entry.outputs?.[nodeId] && entry.prompt?.[2]?.[nodeId]?.class_type === classType) {
      runs.push({ promptId, outputs: entry.outputs });
    }
  }
  return runs;
}
