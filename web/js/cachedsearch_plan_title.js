// The Pruning Plan's title says what the plan does, following its widgets: "Prune drafts at 40 % (keep the best 4
// previews)", "... at step 20 ...", or "Prune drafts in rounds: 20%:4, 40%:2" once a schedule replaces those
// widgets. Only a title of that form (a shipped workflow's) is rewritten: a title the artist typed stays. A schedule
// the node would refuse when queued (rounds that fall, a typo) is said on the node as it is typed, in the node's own
// words: the server checks it (POST /cachedsearch/pruning_schedule runs the node's validation), so the rule lives
// in one place.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { element, ensureStyle, fitNode, onWidgetChange, panelElement, wrappedLines } from "./cachedsearch_dom.js";

const PLAN = "CachedSearchPruningPlan";
const SAID = /^Prune drafts (at|in rounds)\b/;
const FOLLOWED = ["schedule", "keep", "prune_fraction", "prune_step"];
const SCHEDULE_ROUTE = "/cachedsearch/pruning_schedule";
const CHECK = "cachedsearch_schedule_check";
const FONT = "12px sans-serif";
const LINE_HEIGHT = 16;
const STYLE = `.cachedsearch-schedule-check { font: ${FONT}; line-height: ${LINE_HEIGHT}px; color: #e88;
  overflow-wrap: anywhere; }`;

function planTitle(values) {
  const schedule = typeof values.schedule === "string" ? values.schedule.trim() : "";
  if (schedule) return `Prune drafts in rounds: ${schedule}`;
  const where = values.prune_step > 0 ? `step ${values.prune_step}` : `${Math.round(100 * values.prune_fraction)} %`;
  return `Prune drafts at ${where} (keep the best ${values.keep} previews)`;
}

const widgetValue = (node, name) => node.widgets?.find((w) => w.name === name)?.value;

function retitle(node) {
  if (!SAID.test(node.title ?? "")) return;
  const values = Object.fromEntries(FOLLOWED.map((name) => [name, widgetValue(node, name)]));
  const title = planTitle(values);
  if (title !== node.title) {
    node.title = title;
    node.setDirtyCanvas?.(true, true);
  }
}

// The line under the widgets saying why the node would refuse its schedule (`message`; none: the line goes).
function sayRefusal(node, message) {
  const shown = node.widgets?.find((widget) => widget.name === CHECK);
  if (!message) {
    if (shown) node.removeWidget(shown);
    node.setDirtyCanvas?.(true, true);
    return;
  }
  ensureStyle("cachedsearch-schedule-style", STYLE);
  const line = panelElement(node, CHECK, "cachedsearch-schedule-check",
    (panel, width) => LINE_HEIGHT * wrappedLines(panel.textContent, width, FONT));
  line.textContent = `Refused when queued: ${message}`;
  fitNode(node);
}

// Asks the server whether the node accepts its schedule, when it changed since it last asked.
async function checkSchedule(node) {
  const schedule = widgetValue(node, "schedule");
  const text = typeof schedule === "string" ? schedule : "";
  if (text === node.cachedsearchCheckedSchedule) return;
  node.cachedsearchCheckedSchedule = text;
  let message = null;
  if (text.trim()) {
    try {
      const response = await api.fetchApi(SCHEDULE_ROUTE, { method: "POST",
        headers: { "Content-Type": "application/json" }, body: JSON.stringify({ schedule: text }) });
      if (!response.ok) message = (await response.json()).error;
    } catch (error) {
      return; // no answer: the node's validation still refuses it when queued
    }
  }
  if (text === node.cachedsearchCheckedSchedule) sayRefusal(node, message);
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
    const onNodeCreated = nodeType.prototype.onNodeCreated;
    nodeType.prototype.onNodeCreated = function () {
      const result = onNodeCreated?.apply(this, arguments);
      followWidgets(this);
      return result;
    };
  },
});

// Retitles and checks `node` now and whenever one of the widgets its title says changes.
function followWidgets(node) {
  node.cachedsearchRetitle ??= () => {
    retitle(node);
    checkSchedule(node).catch((error) => console.warn("CachedSearch: could not check the schedule", error));
  };
  for (const widget of node.widgets ?? []) {
    if (FOLLOWED.includes(widget.name)) onWidgetChange(widget, node.cachedsearchRetitle);
  }
  node.cachedsearchRetitle();
}
