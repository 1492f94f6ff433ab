// Shows a search's results on its nodes: the ranked drafts on the Verifier, the drafts and their cost on the
// samplers, the delivered seed and who chose it on Recommit. Data comes from the nodes' UI payloads and is kept
// in node.properties so it survives a page reload with the saved workflow; fields an older CachedSearch did not
// send are left out of the panels.
import { app } from "../../../scripts/app.js";
import { api } from "../../../scripts/api.js";
import { createPlayer, ensurePlayerStyle, showLarge } from "./cachedsearch_player.js";
import { earlierRuns, loadWaiting, onWaitingChanged, pickCost, queuePick, waiting } from "./cachedsearch_pick.js";
import { graphNode, removeProgressText, showResultsOn, showWhenReused } from "./cachedsearch_reused.js";

const PANEL = "cachedsearch_results";
const FONT = "11px sans-serif";
const LINE_HEIGHT = 15;
const STORED = "cachedsearch_last_output";
const STORED_PROMPT = "cachedsearch_last_prompt";
const RENDERERS = {
  CachedSearchVerifier: renderRanking,
  CachedSearchSampler: renderDrafts,
  CachedSearchSamplerAdvanced: renderDrafts,
  CachedSearchSamplerExperts: renderDrafts,
  CachedSearchRecommit: renderDelivery,
  CachedSearchVideoVerifier: renderRanking,
  CachedSearchCombineScores: renderRanking,
};
const SEED_DIGITS_SHOWN = 6; // consecutive candidates differ in their last digits

const STYLE = `
.cachedsearch-panel { font: ${FONT}; color: var(--fg-color, #ddd); overflow: hidden; }
.cachedsearch-panel .cachedsearch-content { display: flow-root; }
.cachedsearch-line { line-height: ${LINE_HEIGHT}px; padding: 2px 0; overflow-wrap: anywhere; }
.cachedsearch-summary { line-height: ${LINE_HEIGHT}px; padding: 4px 0; overflow-wrap: anywhere; }
.cachedsearch-muted { opacity: 0.7; }
.cachedsearch-panel table { border-collapse: collapse; width: 100%; }
.cachedsearch-panel td, .cachedsearch-panel th { padding: 1px 3px; text-align: right; white-space: nowrap; }
.cachedsearch-panel th { font-weight: normal; opacity: 0.7; }
.cachedsearch-panel tr.winner { background: rgba(80, 170, 90, 0.35); font-weight: bold; }
.cachedsearch-panel tr.pruned td:not(.pick) { opacity: 0.5; font-style: italic; }
.cachedsearch-panel td.seed { cursor: copy; }
.cachedsearch-panel .bar { height: 3px; background: #6a6; margin-top: 1px; }
.cachedsearch-panel button { font: 10px sans-serif; padding: 0 3px; margin: 0 0 0 2px; cursor: pointer; }
.cachedsearch-panel .cachedsearch-strip { display: flex; flex-wrap: wrap; gap: 3px; }
.cachedsearch-panel .cachedsearch-strip figure { margin: 0; text-align: center; }
.cachedsearch-panel .cachedsearch-wait { background: rgba(200, 150, 40, 0.35); padding: 3px; }`;

function ensureStyle() {
  ensurePlayerStyle();
  if (document.getElementById("cachedsearch-style")) return;
  const style = document.createElement("style");
  style.id = "cachedsearch-style";
  style.textContent = STYLE;
  document.head.append(style);
}

let measuring;

function textWidth(text) {
  measuring ??= document.createElement("canvas").getContext("2d");
  measuring.font = FONT;
  return measuring.measureText(text).width;
}

// Lines a text wraps into at `width` px (5 % slack for fonts).
function wrappedLines(text, width) {
  const usable = 0.95 * Math.max(60, width);
  const space = textWidth(" ");
  let lines = 1;
  let line = 0;
  for (const word of text.split(" ")) {
    const wordWidth = textWidth(word);
    if (line > 0 && line + space + wordWidth > usable) {
      lines += 1;
      line = wordWidth;
    } else {
      line += (line > 0 ? space : 0) + wordWidth;
    }
  }
  return lines;
}

// The frontend's inset of a DOM widget's element on each side (BaseDOMWidgetImpl.DEFAULT_MARGIN where the
// widget does not say).
const DOM_WIDGET_MARGIN = 10;

function panelOf(node) {
  let widget = node.widgets?.find((w) => w.name === PANEL);
  if (!widget) {
    const element = document.createElement("div");
    element.className = "cachedsearch-panel";
    // Classic mode gives a DOM widget its minimum height when the node has no spare height (right after a live
    // run, the frontend's progress text and image preview widgets take the spare), and lays the element out
    // that height less the widget's margin on each side: the minimum must include both margins.
    const margin = () => widget?.margin ?? DOM_WIDGET_MARGIN;
    widget = node.addDOMWidget(PANEL, "cachedsearch", element, {
      serialize: false,
      hideOnZoom: false,
      getMinHeight: () => contentHeight(element, node.size[0] - 2 * margin()) + 2 * margin(),
    });
  }
  return widget.element;
}

// The content's height: as laid out when it is on the page at that width, else as estimated for that width.
function contentHeight(panel, width) {
  const content = panel.firstElementChild;
  if (!content) return 0;
  const estimate = panel.estimateHeight?.(width) ?? 0;
  // Right after a live run the element may not yet be laid out at the node's width (a few pixels wide, its text
  // wrapped into a column thousands of pixels tall): its height counts only once it has that width.
  const laidOutAtWidth = Math.abs(panel.clientWidth - width) <= 2;
  return Math.max(estimate, laidOutAtWidth ? content.offsetHeight : 0);
}

// A panel's content; `estimate(width)`: its height before it is laid out. The node grows to fit it (height, and
// width where a table is wider than the node).
function show(node, content, estimate) {
  const panel = panelOf(node);
  panel.estimateHeight = estimate;
  content.classList.add("cachedsearch-content");
  panel.replaceChildren(content);
  fitNode(node);
  requestAnimationFrame(() => fitNode(node, panel));
}

function fitNode(node, panel) {
  if (panel && panel.clientWidth > 0 && panel.scrollWidth > panel.clientWidth) {
    node.setSize([node.size[0] + panel.scrollWidth - panel.clientWidth + 2, node.size[1]]);
  }
  const needed = node.computeSize?.();
  if (needed && node.size[1] < needed[1]) node.setSize([node.size[0], needed[1]]);
  node.setDirtyCanvas?.(true, true);
}

function element(tag, text, className) {
  const made = document.createElement(tag);
  if (text !== undefined) made.textContent = text;
  if (className) made.className = className;
  return made;
}

const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)}%` : "-");
const signed = (value) => `${value >= 0 ? "+" : "−"}${Math.abs(value).toFixed(3)}`;

export function shortSeed(seed) {
  const text = String(seed);
  return text.length > SEED_DIGITS_SHOWN + 2 ? `…${text.slice(-SEED_DIGITS_SHOWN)}` : text;
}

// A seed cell: the last digits, the whole seed on hover and copied on click.
function seedCell(seed) {
  const cell = element("td", shortSeed(seed), "seed");
  cell.title = `seed ${seed} (click to copy)`;
  cell.addEventListener("click", (event) => {
    event.stopPropagation();
    navigator.clipboard?.writeText(String(seed)).then(() => {
      cell.title = `seed ${seed} (copied)`;
    }, () => {});
  });
  return cell;
}

function framesOf(row) {
  return Array.isArray(row.frames) ? row.frames.filter((frame) => frame?.filename) : [];
}

// Rows of a ranking or a draft list, candidates numbered in seed order (pruned ones included). Payloads of an
// older CachedSearch renumbered survivors and listed pruned candidates apart, without numbers: there the
// numbers follow from the seeds (a search's seeds are consecutive).
function candidateRows(rows, output) {
  const listed = rows.filter((row) => row && typeof row === "object");
  const pruned = listed.some((row) => row.pruned) ? [] : (Array.isArray(output.cachedsearch_pruned)
    ? output.cachedsearch_pruned.map((row) => ({ ...row, pruned: true })) : []);
  const all = [...listed, ...pruned];
  if (pruned.length > 0) {
    const first = Math.min(...all.map((row) => Number(row.seed)));
    for (const row of all) row.candidate = Number(row.seed) - first + 1;
  }
  const images = Array.isArray(output.images) ? output.images : [];
  if (!all.some((row) => framesOf(row).length)) {
    // an older payload: one frame per ranked candidate, in the rows' order
    listed.filter((row) => !row.pruned).forEach((row, index) => {
      if (images[index]) row.frames = [images[index]];
    });
  }
  return all;
}

// A pruned search's rounds in order, `{round, step, scored, kept, dropped}` (candidate numbers), from the
// payload's cachedsearch_pruning; none where an older CachedSearch did not send it.
function pruneRounds(output) {
  const rounds = output.cachedsearch_pruning?.[0]?.rounds;
  const valid = (round) => typeof round?.step === "number" &&
    ["scored", "kept", "dropped"].every((name) => Array.isArray(round[name]));
  return Array.isArray(rounds) && rounds.every(valid) ? rounds : [];
}

// Where a search pruned in several rounds: each dropped candidate's round, by candidate number. A single prune
// reads as it always did ("pruned" and its step), so it gets none.
function roundsDropping(rounds) {
  const byCandidate = new Map();
  if (rounds.length < 2) return byCandidate;
  rounds.forEach((round, index) => {
    for (const candidate of round.dropped) byCandidate.set(candidate, { number: index + 1, step: round.step });
  });
  return byCandidate;
}

// A pruned row in a few words: when it was dropped, with its round where there were several (✂ as on the
// Sampler's captions, so that the table keeps to the room a Verifier is laid out with).
function droppedText(row, dropping) {
  const round = dropping.get(row.candidate);
  return round ? `✂ step ${round.step} (round ${round.number})` : "pruned";
}

// One line for a search pruned in several rounds: "rounds: step 6 kept 8 of 16 · step 10 kept 4 of 8", who each
// round dropped on hover; undefined for a single prune or none.
function roundsLine(rounds) {
  if (rounds.length < 2) return undefined;
  const kept = (round) => `step ${round.step} kept ${round.kept.length} of ${round.scored.length}`;
  const text = `rounds: ${rounds.map(kept).join(" · ")}`;
  const line = element("div", text, "cachedsearch-line cachedsearch-rounds");
  line.title = rounds.map((round, index) => `round ${index + 1} at step ${round.step} dropped candidates ` +
    `${round.dropped.join(", ") || "none"} on their preview scores`).join("\n");
  return line;
}

// The preview scores a row had at each round it reached, for its preview cell's tooltip.
function roundScoresTitle(row, dropping) {
  if (!Array.isArray(row.round_scores) || row.round_scores.length === 0) return "";
  const last = row.round_scores.length - 1;
  const verdict = dropping.has(row.candidate) ? "dropped here" : "kept";
  return "preview score " + row.round_scores.map((entry, index) => `at step ${entry.step}: ` +
    `${typeof entry.score === "number" ? entry.score.toFixed(4) : "-"}${index === last ? ` (${verdict})` : ""}`)
    .join("; ");
}

const SAVED_DRAFTS = "These drafts come from a saved workflow: queue it to pick from them.";

// Where a pick on this panel goes; undefined when the node has not run in this server's history.
function pickSource(node, rows) {
  const promptId = node.cachedsearchView?.promptId ?? node.properties?.[STORED_PROMPT];
  return promptId ? { promptId, nodeId: String(node.id), among: rows.length } : undefined;
}

function describe(row) {
  return `candidate ${row.candidate ?? "?"} (seed ${row.seed})`;
}

// A pick button's tooltip: what the click does now (`state`: pickCost's, undefined until it is known).
function pickTitle(mode, row, state) {
  const what = mode === "keep" ? `the draft of ${describe(row)} as drafted` : `${describe(row)} at full compute`;
  return state === "waiting" ? `Deliver ${what}: answers the run that waits for your pick`
    : `Queue the run that made these drafts again to deliver ${what} (the note under the table says what it reuses)`;
}

function pickActions(node, rows, row, status) {
  const state = node.cachedsearchPick?.state;
  const actions = [{ text: "Commit this", mode: "commit", className: "cachedsearch-pick-commit",
    title: pickTitle("commit", row, state) }];
  if (!row.pruned) {
    actions.push({ text: "Keep this", mode: "keep", className: "cachedsearch-pick-keep",
      title: pickTitle("keep", row, state) });
  }
  return actions.map((action) => ({ ...action, run: () => pick(node, rows, row, action.mode, status) }));
}

async function pick(node, rows, row, mode, status) {
  const source = pickSource(node, rows);
  const say = (text) => {
    if (status) status.textContent = text;
  };
  if (!source) {
    say(SAVED_DRAFTS);
    return;
  }
  say(`${mode === "keep" ? "keeping" : "committing"} ${describe(row)}…`);
  try {
    say(`${await queuePick(source, row.candidate, mode)} (seed ${row.seed})`);
  } catch (error) {
    say(`Could not pick ${describe(row)}: ${error.message}`);
  }
}

function enlarge(node, rows, row, status, what) {
  const frames = framesOf(row);
  if (frames.length === 0) return;
  showLarge(frames, `${describe(row)}${what ? `, ${what}` : ""}`, pickActions(node, rows, row, status));
}

// Every panel of this graph as run `runs[index]` left it (index 0: the newest), so the drafts, the ranking and
// the delivery shown are one run's. A node that showed nothing in that run keeps what it shows.
function showRun(runs, index) {
  const { promptId, outputs } = runs[index];
  for (const node of app.graph?.nodes ?? []) {
    const renderer = RENDERERS[node.comfyClass ?? node.type];
    const output = outputs[String(node.id)];
    if (!renderer || !output) continue;
    node.cachedsearchView = index === 0 ? undefined : { runs, index, promptId };
    renderer(node, output);
  }
}

// "‹ earlier" / "newer ›" through this workflow's runs in the server's history, and what a pick costs there.
function runNavigation(node) {
  const line = element("div", undefined, "cachedsearch-line cachedsearch-runs");
  const view = node.cachedsearchView;
  const label = element("span", view ? `earlier run ${view.index} of ${view.runs.length - 1}` : "newest run");
  const step = async (by) => {
    try {
      const runs = view?.runs ?? (await earlierRuns(String(node.id), node.comfyClass ?? node.type, app.graph?.id));
      const index = (view?.index ?? 0) + by;
      if (index < 0 || index >= runs.length) return;
      showRun(runs, index);
    } catch (error) {
      label.textContent = `history unavailable: ${error.message}`;
    }
  };
  const earlier = element("button", "‹ earlier", "cachedsearch-earlier");
  earlier.title = "Show this workflow's earlier run (from ComfyUI's history) on every panel, to pick from its drafts";
  earlier.addEventListener("click", () => step(1));
  const newer = element("button", "newer ›", "cachedsearch-newer");
  newer.disabled = !view;
  newer.addEventListener("click", () => step(-1));
  line.append(earlier, newer, " ", label);
  return line;
}

const PICK_NOTE_BEFORE = "Commit this renders a draft at full compute; Keep this delivers it as drafted.";

// What a pick costs, in the search's own numbers (`cost`: its cachedsearch_cost; undefined: none known).
function pickNoteText(state, cost) {
  const calls = (count) => (typeof count === "number" ? ` (${count} transformer calls)` : "");
  const commit = cost?.commit_free ? "Commit this costs nothing more (every draft already is full compute)"
    : `Commit this costs one full render${calls(cost?.rollout_calls)}`;
  const draftsAgain = `a pick drafts this search again (same seeds, same drafts${typeof cost?.search_calls === "number"
    ? `, ${cost.search_calls} transformer calls` : ""})`;
  switch (state) {
    case "waiting":
      return `This run waits for your pick: ${commit}; Keep this costs nothing.`;
    case "held":
      return `ComfyUI still holds these drafts, so a pick reuses them: ${commit}; Keep this costs nothing.`;
    case "maybe":
      return "ComfyUI may still hold these drafts (it keeps earlier runs while memory lasts): then " +
        `${commit}, Keep this nothing; if not, ${draftsAgain} first.`;
    case "gone":
      return `ComfyUI no longer holds these drafts: ${draftsAgain}; then ${commit}, Keep this nothing more.`;
    case "lost":
      return "ComfyUI no longer has the run that made these drafts: queue the graph again to pick.";
    default:
      return "Cannot tell whether ComfyUI still holds these drafts: if it does not, a pick drafts this search again.";
  }
}

// One line under a table: what a pick costs now, from what ComfyUI holds (and the buttons' tooltips with it).
function pickNote(node, rows, content) {
  const note = element("div", PICK_NOTE_BEFORE, "cachedsearch-line cachedsearch-pick-note cachedsearch-muted");
  const source = pickSource(node, rows);
  if (!source) {
    note.textContent = SAVED_DRAFTS;
    return note;
  }
  pickCost(source.promptId, source.nodeId).then(({ state, samplerId, cost }) => {
    const known = cost ?? graphNode(samplerId)?.properties?.[STORED]?.cachedsearch_cost?.[0];
    node.cachedsearchPick = { state };
    note.dataset.state = state;
    note.textContent = pickNoteText(state, known);
    for (const row of rows) {
      for (const mode of ["commit", "keep"]) {
        const button = content.querySelector(`tr[data-candidate="${row.candidate}"] button.cachedsearch-pick-${mode}`);
        if (button) button.title = pickTitle(mode, row, state);
      }
    }
    fitNode(node);
  });
  return note;
}

function verifierLine(output) {
  const verifier = output.cachedsearch_verifier?.[0];
  if (!verifier?.name) return undefined;
  const direction = verifier.higher_is_better === false ? "lower is better" : "higher is better";
  return element("div", `${verifier.name} score, ${direction}${verifier.scale ? `: ${verifier.scale}` : ""}`,
    "cachedsearch-line cachedsearch-verifier");
}

function skippedCell(row) {
  const cell = element("td", percent(row.skipped, row.calls));
  if (Array.isArray(row.stages) && row.stages.length > 1) {
    cell.textContent = row.stages.map((stage) => percent(stage.skipped, stage.calls)).join("/");
    cell.title = row.stages.map((stage) => `${stage.stage}: ${stage.skipped} of ${stage.calls} calls skipped`).join("; ");
  }
  return cell;
}

// What the ranking table's less obvious columns mean, on hover.
const HEADER_TOOLTIPS = {
  preview: "Preview score at the prune step: compare previews with previews, not with final scores",
  skipped: "Share of this draft's transformer calls the cache skipped",
  time: "Seconds this draft took on this machine",
};

function renderRanking(node, output) {
  const given = output.cachedsearch_ranking;
  if (!Array.isArray(given) || given.length === 0) return false;
  const rows = candidateRows(given.map((row) => ({ ...row })), output);
  const ranked = rows.filter((row) => !row.pruned && typeof row.score === "number").sort((a, b) => b.score - a.score);
  const rounds = pruneRounds(output);
  const dropping = roundsDropping(rounds);
  // the last round's dropped first: preview scores compare only within a round
  const roundOf = (row) => dropping.get(row.candidate)?.number ?? 0;
  const pruned = rows.filter((row) => row.pruned)
    .sort((a, b) => roundOf(b) - roundOf(a) || (b.preview_score ?? -Infinity) - (a.preview_score ?? -Infinity));
  // Extra per-candidate columns: VideoScore's aspects, or each verifier behind a combined score.
  const columns = ranked[0]?.columns && typeof ranked[0].columns === "object" ? Object.keys(ranked[0].columns) : [];
  const hasMargin = ranked.some((row) => typeof row.margin === "number");
  const hasPreview = rows.some((row) => typeof row.preview_score === "number");
  const hasFrames = rows.some((row) => framesOf(row).length);
  const scores = ranked.map((row) => row.score);
  const [low, high] = [Math.min(...scores), Math.max(...scores)];
  const status = element("div", "", "cachedsearch-line cachedsearch-status");

  const table = element("table");
  const header = element("tr");
  const titles = ["", "#", "seed", ...columns, "score", ...(hasMargin ? ["margin"] : []),
    ...(hasPreview ? ["preview"] : []), "skipped", "time", "pick"];
  for (const title of titles) {
    const cell = element("th", title);
    if (HEADER_TOOLTIPS[title]) cell.title = HEADER_TOOLTIPS[title];
    header.append(cell);
  }
  table.append(header);
  for (const row of [...ranked, ...pruned]) {
    const line = element("tr", undefined, row.pruned ? "pruned" : row.winner ? "candidate winner" : "candidate");
    line.dataset.seed = row.seed;
    line.dataset.candidate = row.candidate;
    if (!row.pruned) line.dataset.score = row.score;
    const frames = framesOf(row);
    const thumbnail = element("td");
    if (frames.length) {
      const player = createPlayer(frames, `${describe(row)}: click to enlarge`);
      player.addEventListener("click", (event) => {
        event.stopPropagation();
        enlarge(node, rows, row, status, row.pruned ? droppedText(row, dropping) : `score ${row.score.toFixed(4)}`);
      });
      thumbnail.append(player);
    }
    line.append(thumbnail, element("td", `${row.winner ? "★ " : ""}${row.candidate ?? "–"}`), seedCell(row.seed));
    for (const name of columns) {
      const value = row.columns?.[name];
      const cell = element("td", typeof value === "number" ? value.toFixed(3) : "-");
      cell.dataset.column = name;
      line.append(cell);
    }
    const score = element("td", row.pruned ? droppedText(row, dropping) : row.score.toFixed(3), "score");
    if (!row.pruned && high > low) {
      const bar = element("div", undefined, "bar");
      bar.style.width = `${Math.round((100 * (row.score - low)) / (high - low))}%`;
      score.append(bar);
    }
    if (row.pruned) score.title = `pruned at step ${row.prune_step ?? "?"}${dropping.has(row.candidate)
      ? ` (round ${dropping.get(row.candidate).number} of ${rounds.length})` : ""}: no final score`;
    line.append(score);
    // a dropped row's round takes the margin's room too: it has no margin, and the table stays narrow
    if (hasMargin && dropping.has(row.candidate)) {
      score.colSpan = 2;
    } else if (hasMargin) {
      const margin = element("td", typeof row.margin === "number" ? signed(row.margin) : "-", "margin");
      margin.title = row.winner ? "ahead of the runner-up" : "behind the winner";
      line.append(margin);
    }
    if (hasPreview) {
      const preview = element("td", typeof row.preview_score === "number" ? row.preview_score.toFixed(3) : "-", "preview");
      preview.title = roundScoresTitle(row, dropping);
      line.append(preview);
    }
    line.append(skippedCell(row), element("td", typeof row.seconds === "number" ? row.seconds.toFixed(1) : "-"));
    const pickCell = element("td", undefined, "pick");
    for (const action of pickActions(node, rows, row, status)) {
      const button = element("button", action.mode === "keep" ? "keep" : "commit", action.className);
      button.title = action.title;
      button.addEventListener("click", (event) => {
        event.stopPropagation();
        action.run();
      });
      pickCell.append(button);
    }
    line.append(pickCell);
    table.append(line);
  }
  const content = element("div");
  const verifier = verifierLine(output);
  const nav = runNavigation(node);
  const note = pickNote(node, rows, content);
  const roundsSummary = roundsLine(rounds);
  const lines = [verifier, roundsSummary].filter(Boolean);
  content.append(nav, ...lines, table, note, status);
  const rowHeight = hasFrames ? 40 : 19;
  show(node, content, (width) => 2 * LINE_HEIGHT + 8 + 20 + rowHeight * rows.length +
    lines.reduce((sum, line) => sum + LINE_HEIGHT * wrappedLines(line.textContent, width) + 4, 0) +
    LINE_HEIGHT * wrappedLines(note.textContent, width) + 4);
  return true;
}

// The search's cost from the one cost model, in two short sentences; the seconds and why calls lead are on the
// node's doc page.
function costLine(output) {
  const cost = output.cachedsearch_cost?.[0];
  if (!cost || typeof cost.calls_ratio !== "number") return "";
  const calls = typeof cost.search_calls === "number" && typeof cost.full_calls === "number"
    ? ` (${cost.search_calls} of ${cost.full_calls} transformer calls)` : "";
  const commit = cost.commit_free ? " A commit adds nothing: every draft already is full compute."
    : typeof cost.commit_calls === "number" ? ` A commit adds ${cost.commit_calls} calls.` : "";
  return ` The drafts cost ${Math.round(100 * cost.calls_ratio)}% of full best-of-${cost.num_candidates ?? "N"}` +
    `${calls}.${commit}`;
}

function expertShares(rows) {
  const stages = new Map();
  for (const row of rows) {
    for (const stage of Array.isArray(row.stages) ? row.stages : []) {
      const total = stages.get(stage.stage) ?? { skipped: 0, calls: 0 };
      stages.set(stage.stage, { skipped: total.skipped + stage.skipped, calls: total.calls + stage.calls });
    }
  }
  return stages.size > 1
    ? ` (${[...stages].map(([name, total]) => `${name} ${percent(total.skipped, total.calls)}`).join(", ")})` : "";
}

// A link to this node's doc page (the frontend serves web/docs under the extension's folder).
function docLink(node, text) {
  const link = element("a", text, "cachedsearch-doc-link");
  link.href = new URL(`../docs/${node.comfyClass ?? node.type}.md`, import.meta.url).href;
  link.target = "_blank";
  link.rel = "noopener";
  return link;
}

function renderDrafts(node, output) {
  const given = output.cachedsearch_drafts;
  if (!Array.isArray(given) || given.length === 0) return false;
  const rows = candidateRows(given.map((row) => ({ ...row })), output);
  const finished = rows.filter((row) => !row.pruned);
  const pruned = rows.filter((row) => row.pruned);
  const skipped = finished.reduce((sum, row) => sum + row.skipped, 0);
  const calls = finished.reduce((sum, row) => sum + row.calls, 0);
  const meanSeconds = finished.reduce((sum, row) => sum + row.seconds, 0) / Math.max(1, finished.length);
  const saving = skipped > 0 && calls > skipped
    ? `${percent(skipped, calls)} of transformer calls skipped${expertShares(finished)} (~${(calls / (calls - skipped)).toFixed(2)}x fewer)`
    : "no transformer calls skipped";
  const rounds = pruneRounds(output);
  const dropping = roundsDropping(rounds);
  const drafts = !pruned.length ? `${finished.length} drafts`
    : dropping.size ? `${finished.length} of ${rows.length} drafts kept by preview score in ${rounds.length} rounds`
      : `${finished.length} of ${rows.length} drafts kept at step ${pruned[0].prune_step} by preview score`;
  const budget = budgetLine(output.cachedsearch_budget?.[0]);
  const text = `${drafts}, ${saving}, mean ${meanSeconds.toFixed(2)} s per draft.${costLine(output)}` +
    (budget ? ` ${budget[0].toUpperCase()}${budget.slice(1)}.` : "");
  const content = element("div");
  const summary = element("div", text, "cachedsearch-summary");
  if (output.cachedsearch_cost?.[0]) summary.append(" ", docLink(node, "cost details"));
  const roundsSummary = roundsLine(rounds);
  content.append(summary, ...(roundsSummary ? [roundsSummary] : []));
  const watchable = rows.filter((row) => framesOf(row).length);
  if (watchable.length) {
    const status = element("div", "", "cachedsearch-line cachedsearch-status");
    const strip = element("div", undefined, "cachedsearch-strip");
    for (const row of watchable) {
      const figure = element("figure");
      const fate = row.pruned ? droppedText(row, dropping) : "draft";
      const player = createPlayer(framesOf(row), `${describe(row)}${row.pruned ? `, ${fate}` : ""}: click to enlarge`);
      player.addEventListener("click", () => enlarge(node, rows, row, status, fate));
      // several rounds: the step that dropped it, as the rounds line above names the rounds
      const cut = dropping.has(row.candidate) ? ` ✂${dropping.get(row.candidate).step}` : row.pruned ? " ✂" : "";
      figure.append(player, element("figcaption", `${row.candidate}${cut}`));
      strip.append(figure);
    }
    content.append(strip, status);
  }
  show(node, content, (width) => {
    const perLine = Math.max(1, Math.floor(width / 67));
    const stripHeight = watchable.length ? Math.ceil(watchable.length / perLine) * 55 + LINE_HEIGHT + 4 : 0;
    const roundsHeight = roundsSummary ? LINE_HEIGHT * wrappedLines(roundsSummary.textContent, width) + 4 : 0;
    return 8 + LINE_HEIGHT * wrappedLines(`${text} cost details`, width) + roundsHeight + stripHeight;
  });
  return true;
}

// A fixed-budget search's choice: N, what it predicted against best-of-M, the break-even width.
function budgetAmount(value, unit) {
  return unit === "wall time" ? `${value.toFixed(2)} s` : `${Math.round(value)} calls`;
}

function budgetLine(budget, measuredCommit) {
  if (!budget || typeof budget.full_cost !== "number") return "";
  const amount = (value) => budgetAmount(value, budget.unit);
  const breakEven = typeof budget.break_even_width === "number" ? `, N* ${budget.break_even_width.toFixed(2)}` : "";
  const wallTime = budget.deterministic ? "" : ", N depends on wall time";
  let line = `budget best-of-${budget.rollouts} (${amount(budget.budget)}): N = ${budget.width}, predicted ` +
    `${amount(budget.predicted_total)}${breakEven}${wallTime}`;
  if (typeof measuredCommit === "number") {
    line += `; recommit predicted ${amount(budget.full_cost)}, measured ${amount(measuredCommit)}`;
  }
  return line;
}

function chooserLine(delivery) {
  const choice = delivery.verifier_choice;
  if (delivery.picked_by === "you") {
    const preferred = choice ? `; the verifier preferred candidate ${choice.candidate} (seed ${choice.seed})` : "";
    return `picked by you: candidate ${delivery.candidate} (seed ${delivery.seed})${preferred}`;
  }
  return delivery.picked_by === "verifier" ? "picked by the verifier" : "";
}

function renderDelivery(node, output) {
  const delivery = output.cachedsearch_delivery?.[0];
  if (!delivery) return false;
  // The Sampler's cost model with this delivery: transformer calls with the commit first (exact, the Sampler's
  // figure), then the time measured on this machine. A run saved by an older CachedSearch carries calls_ratio and
  // relative_cost (time) on the delivery itself, or the time only.
  const given = delivery.cost ??
    { calls_ratio_with_commit: delivery.calls_ratio, seconds_ratio_with_commit: delivery.relative_cost };
  const seconds = given.seconds_ratio_with_commit;
  const time = typeof seconds === "number" ? `${(100 * seconds).toFixed(1)}%` : "";
  const best = `full best-of-${delivery.num_candidates}`;
  let cost = "no commit: drafts only";
  if (typeof given.calls_ratio_with_commit === "number") {
    cost = `search cost ${(100 * given.calls_ratio_with_commit).toFixed(1)}% of ${best}'s transformer calls` +
      (given.kept ? ", no commit" : "") + (time ? ` (${time} in time measured on this machine)` : "");
  } else if (time) {
    cost = `search cost ${time} of ${best} in time`;
  }
  const budget = budgetLine(delivery.budget, delivery.budget?.measured_commit);
  const chooser = chooserLine(delivery);
  const text = `delivered seed ${delivery.seed} (candidate ${delivery.candidate}, ${delivery.mode})` +
    `${chooser ? `; ${chooser}` : ""}; ${cost}${budget ? `; ${budget}` : ""}`;
  // The delivered video itself shows where the workflow decodes and saves it (its Save Video node).
  const content = element("div");
  content.append(element("div", text, "cachedsearch-summary"));
  show(node, content, (width) => 8 + LINE_HEIGHT * wrappedLines(text, width));
  return true;
}

// While a Recommit waits for the artist, its panel shows only that (its last delivery was another run's) and
// offers the verifier's choice; the drafts' own Commit/Keep buttons answer the wait too. When the wait ends
// without a delivery (Cancel), the last delivery shows again.
function showWaiting(node) {
  const wait = [...waiting.values()].find((entry) => entry.node === String(node.id));
  const panel = node.widgets?.find((w) => w.name === PANEL)?.element;
  if (!wait) {
    if (panel?.querySelector(".cachedsearch-wait")) {
      panel.replaceChildren();
      const stored = node.properties?.[STORED];
      if (!stored || !renderDelivery(node, stored)) fitNode(node);
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
    deliver.title = `Deliver candidate ${wait.preselected} at full compute: answers the run that waits for your pick`;
    deliver.addEventListener("click", () => queuePick({ promptId: wait.prompt_id, nodeId: String(node.id),
      among: wait.candidates }, wait.preselected, "commit").catch((error) => banner.append(` ${error.message}`)));
    banner.append(deliver);
  }
  const content = element("div");
  content.append(banner);
  show(node, content, (width) => 8 + LINE_HEIGHT * (wrappedLines(text, width) + 1));
}

function render(node, output, promptId) {
  const renderer = RENDERERS[node.comfyClass ?? node.type];
  if (!renderer || !output || typeof output !== "object") return;
  try {
    if (promptId !== undefined) {
      node.cachedsearchView = undefined;
      node.properties[STORED_PROMPT] = promptId;
    }
    if (renderer(node, output) && !node.cachedsearchView) node.properties[STORED] = output;
    if (renderer === renderDelivery) showWaiting(node);
  } catch (error) {
    console.warn("CachedSearch: could not show this node's results", error);
  }
}

api.addEventListener("executed", ({ detail }) => {
  // The run a node's panel shows, for its pick buttons (the frontend's onExecuted does not pass it).
  const node = graphNode(String(detail?.display_node ?? detail?.node));
  if (node && RENDERERS[node.comfyClass ?? node.type]) removeProgressText(node);
  if (node && RENDERERS[node.comfyClass ?? node.type] && detail?.prompt_id) {
    node.properties[STORED_PROMPT] = detail.prompt_id;
    node.cachedsearchView = undefined;
    if (detail.output) render(node, detail.output, detail.prompt_id);
  }
});
api.addEventListener("progress_text", ({ detail }) => {
  const node = graphNode(String(detail?.nodeId));
  if (node && RENDERERS[node.comfyClass ?? node.type]) requestAnimationFrame(() => fitNode(node));
});
for (const classType of Object.keys(RENDERERS)) showWhenReused(classType, render);
onWaitingChanged(() => {
  for (const node of app.graph?.nodes ?? []) {
    if ((node.comfyClass ?? node.type) === "CachedSearchRecommit") showWaiting(node);
  }
  // the drafts' pick notes say whether a pick answers a wait or queues a run
  for (const node of app.graph?.nodes ?? []) {
    const stored = node.properties?.[STORED];
    if (stored && RENDERERS[node.comfyClass ?? node.type] !== renderDelivery && !node.cachedsearchView) {
      RENDERERS[node.comfyClass ?? node.type](node, stored);
    }
  }
});

app.registerExtension({
  name: "cachedsearch.results",
  async setup() {
    await loadWaiting();
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!(nodeData.name in RENDERERS)) return;
    ensureStyle();
    showResultsOn(nodeType, render, [STORED, STORED_PROMPT]);
  },
});
