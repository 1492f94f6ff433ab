// The server's record of a run, read through ComfyUI's /history and /queue routes. Their items keep a run's
// prompt as a list ([number, prompt id, API prompt, extra data, outputs to execute]); `runOf` is the one place
// that names those fields, everything else reads {promptId, prompt, extraData, outputs}. Exports only: ComfyUI
// loads every script under web/ as an extension, and this one registers nothing.
import { api } from "../../../scripts/api.js";

// A /history or /queue item as a run: {promptId, prompt (the API prompt), extraData, outputs (every node's UI
// payload; none while it is queued), stopped (whether it ended cancelled or failed: its history status)}.
export function runOf(item) {
  const [, promptId, prompt, extraData] = Array.isArray(item) ? item : item?.prompt ?? [];
  return { promptId, prompt: prompt ?? {}, extraData: extraData ?? {}, outputs: item?.outputs ?? {},
    stopped: item?.status?.status_str === "error" };
}

// Run `promptId` as the history stores it, or, while it still runs or waits in the queue, as its queue item (a
// pick during a run queues behind it); undefined once the server no longer has it. A run that just ended may be
// in neither for a moment (the server stores its history after it leaves the queue): asked again for a few
// seconds before it counts as gone.
export async function findRun(promptId) {
  if (!promptId) return undefined;
  for (let attempt = 0; attempt < 10; attempt += 1) {
    const response = await api.fetchApi(`/history/${encodeURIComponent(promptId)}`);
    const entry = response.ok ? (await response.json())[promptId] : undefined;
    if (entry) return runOf(entry);
    const queue = await api.fetchApi("/queue");
    if (queue.ok) {
      const { queue_running: running = [], queue_pending: pending = [] } = await queue.json();
      const queued = [...running, ...pending].map(runOf).find((run) => run.promptId === promptId);
      if (queued) return queued;
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
  return undefined;
}

// The newest `count` runs of the history, newest first.
export async function recentRuns(count) {
  const response = await api.fetchApi(`/history?max_items=${count}`);
  if (!response.ok) return [];
  return Object.values(await response.json()).map(runOf).reverse();
}

// The sampler whose candidates the node `nodeId` of an API prompt shows (itself for a sampler).
export function samplerOf(prompt, nodeId) {
  const node = prompt[nodeId];
  if (!node) return undefined;
  const candidates = node.inputs?.candidates;
  return Array.isArray(candidates) ? samplerOf(prompt, String(candidates[0])) ?? String(candidates[0]) : String(nodeId);
}
