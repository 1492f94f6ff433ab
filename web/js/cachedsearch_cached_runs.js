// Which nodes each recent run took from ComfyUI's cache (its execution_cached event, sent as the run starts), by
// prompt id: the one record that the panels (showing a reused node's results) and the pick (a wait on reused
// drafts, whether a pick's run reused the drafts) read. Exports only: ComfyUI loads every script under web/ as an
// extension, and this one registers nothing.
import { api } from "../../../scripts/api.js";

const REMEMBERED_RUNS = 16; // the runs of this page whose panels or waits can still ask
const cachedByRun = new Map();
const listeners = new Set();

api.addEventListener("execution_cached", ({ detail }) => {
  if (!detail?.prompt_id) return;
  cachedByRun.set(detail.prompt_id, new Set((detail.nodes ?? []).map(String)));
  if (cachedByRun.size > REMEMBERED_RUNS) cachedByRun.delete(cachedByRun.keys().next().value);
  for (const listener of [...listeners]) listener(detail.prompt_id);
});

// The ids (strings) of the nodes run `promptId` took from ComfyUI's cache; undefined before it started (or when
// it is no longer remembered).
export function cachedNodes(promptId) {
  return cachedByRun.get(promptId);
}

// Calls `listener(promptId)` as each run starts; returns the function that stops it.
export function onRunStarted(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
