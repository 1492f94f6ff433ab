// The Pruning Plan's title says what the plan does, following its widgets: "Prune drafts at 40 % (keep the best 4
// previews)", "... at step 20 ...", or "Prune drafts in rounds: 20%:4, 40%:2" once a schedule replaces those
// widgets. Only a title of that form (a shipped workflow's) is rewritten: a title the artist typed stays.
import { app } from "../../../scripts/app.js";
import { onWidgetChange } from "./cachedsearch_dom.js";

const PLAN = "CachedSearchPruningPlan";
const SAID = /^Prune drafts (at|in rounds)\b/;
const FOLLOWED = ["schedule", "keep", "prune_fraction", "prune_step"];

function planTitle(values) {
  const schedule = typeof values.schedule === "string" ? values.schedule.trim() : "";
  if (schedule) return `Prune drafts in rounds: ${schedule}`;
  const where = values.prune_step > 0 ? `step ${values.prune_step}` : `${Math.round(100 * values.prune_fraction)} %`;
  return `Prune drafts at ${where} (keep the best ${values.keep} previews)`;
}

function retitle(node) {
  if (!SAID.test(node.title ?? "")) return;
  const values = Object.fromEntries((node.widgets ?? []).filter((w) => FOLLOWED.includes(w.name))
    .map((w) => [w.name, w.value]));
  const title = planTitle(values);
  if (title !== node.title) {
    node.title = title;
    node.setDirtyCanvas?.(true, true);
  }
}

app.registerExtension({
  name: "cachedsearch.planTitle",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData.name !== PLAN) return;
    const onConfigure = nodeType.prototype.onConfigure;
    nodeType.prototype.onConfigure = function () {
      const result = onConfigure?.apply(this, arguments);
      followWidgets(this);
      return result;
    };
  },
});

// Retitles `node` now and whenever one of the widgets its title says changes.
function followWidgets(node) {
  node.cachedsearchRetitle ??= () => retitle(node);
  for (const widget of node.widgets ?? []) {
    if (FOLLOWED.includes(widget.name)) onWidgetChange(widget, node.cachedsearchRetitle);
  }
  retitle(node);
}
