// The saved drafts in the artist's hands (nodes/saved_work_routes.py): how much disk the drafts and Calibrate's
// rollouts may take, as a ComfyUI setting (Settings > CachedSearch), and what is kept, where, and clearing it (all,
// or one model's drafts) from the menu (Extensions > CachedSearch > Saved drafts...) or the command palette.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";

const ROUTE = "/cachedsearch/saved_work";
const DEFAULT_GB = 4; // the server's DEFAULT_MAX_BYTES
const COMMAND = "CachedSearch.SavedDrafts";

async function call(path, body) {
  const options = body === undefined ? {} :
    { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) };
  const response = await api.fetchApi(`${ROUTE}${path}`, options);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(answer.error ?? `${response.status} ${response.statusText}`);
  return answer;
}

function megabytes(bytes) {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(2)} GB`;
  return bytes >= 1024 ** 2 ? `${(bytes / 1024 ** 2).toFixed(1)} MB` : `${(bytes / 1024).toFixed(1)} KB`;
}

function element(tag, text, style = "") {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  made.style.cssText = style;
  return made;
}

function button(text, onClick) {
  const made = element("button", text, "margin-left: 8px; padding: 2px 10px; cursor: pointer;");
  made.addEventListener("click", onClick);
  return made;
}

// One line of the dialog per model whose drafts are kept, with its button to clear them.
function modelRow(entry, clear) {
  const row = element("tr");
  const model = entry.model ?? "(model not known: drafts saved before this was recorded)";
  row.append(element("td", model, "padding: 2px 12px 2px 0; word-break: break-all;"),
    element("td", `${entry.drafts} draft${entry.drafts === 1 ? "" : "s"}`, "padding: 2px 12px; white-space: nowrap;"),
    element("td", megabytes(entry.bytes), "padding: 2px 12px; white-space: nowrap;"));
  const cell = element("td");
  if (entry.model !== null) cell.append(button("Clear", () => clear(entry.model, `the drafts of ${entry.model}`)));
  row.append(cell);
  return row;
}

function render(dialog, listing, said) {
  const { bytes, max_bytes: cap, folder, drafts } = listing;
  dialog.replaceChildren(element("h3", "CachedSearch: saved drafts", "margin: 0 0 8px;"),
    element("div", `${megabytes(bytes)} kept of ${megabytes(cap)} (the cap in Settings > CachedSearch, ` +
      `${DEFAULT_GB} GB by default; the oldest are deleted first beyond it), drafts and Calibrate's rollouts, in`),
    element("div", folder, "font-family: monospace; margin: 2px 0 8px; word-break: break-all;"));
  const clear = async (model, what) => {
    if (!confirm(`Delete ${what} from disk? A search computes them again when it needs them.`)) return;
    try {
      const done = await call("/clear", model === undefined ? {} : { model });
      render(dialog, await call(""), `Deleted ${done.removed} draft${done.removed === 1 ? "" : "s"}, ` +
        `${megabytes(done.freed_bytes)} freed.`);
    } catch (error) {
      render(dialog, listing, `Not cleared: ${error.message}`);
    }
  };
  if (drafts.length === 0) dialog.append(element("div", "No draft is saved."));
  else {
    const table = element("table", undefined, "border-collapse: collapse; margin-bottom: 8px;");
    table.append(...drafts.map((entry) => modelRow(entry, clear)));
    dialog.append(table);
  }
  if (said) dialog.append(element("div", said, "margin-bottom: 8px;"));
  const actions = element("div", undefined, "text-align: right;");
  if (drafts.length > 0) actions.append(button("Clear all saved drafts", () => clear(undefined, "every saved draft")));
  actions.append(button("Close", () => dialog.close()));
  dialog.append(actions);
}

async function showSavedDrafts() {
  const dialog = element("dialog", undefined, "max-width: min(720px, 90vw); color: var(--fg-color, #ddd); " +
    "background: var(--comfy-menu-bg, #202020); border: 1px solid var(--border-color, #555); border-radius: 8px; " +
    "padding: 16px; font-size: 14px;");
  dialog.className = "cachedsearch-saved-drafts";
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  try {
    render(dialog, await call(""));
  } catch (error) {
    dialog.replaceChildren(element("div", `The saved drafts could not be listed: ${error.message}`),
      button("Close", () => dialog.close()));
  }
  dialog.showModal();
}

app.registerExtension({
  name: "CachedSearch.SavedWork",
  settings: [{
    id: "CachedSearch.SavedDrafts.CapGB",
    category: ["CachedSearch", "Saved drafts", "Disk cap"],
    name: `Disk space for saved drafts and rollouts (GB, default ${DEFAULT_GB})`,
    tooltip: "Finished drafts and Calibrate's rollouts are kept in ComfyUI's user folder (cachedsearch/saved), so " +
      "a re-queued search computes only what it lacks; beyond this cap the oldest are deleted first. " +
      `Default: ${DEFAULT_GB} GB. See and clear them: Extensions > CachedSearch > Saved drafts...`,
    type: "number",
    defaultValue: DEFAULT_GB,
    attrs: { min: 0.01, max: 100000, step: 0.5 },
    onChange: (value) => {
      if (typeof value !== "number" || !(value > 0)) return;
      call("/cap", { gigabytes: value }).catch((error) => console.warn(`CachedSearch: cap not set: ${error.message}`));
    },
  }],
  commands: [{ id: COMMAND, label: "Saved drafts...", icon: "pi pi-database", function: showSavedDrafts }],
  menuCommands: [{ path: ["Extensions", "CachedSearch"], commands: [COMMAND] }],
});
