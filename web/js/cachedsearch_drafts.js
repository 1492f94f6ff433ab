// A sampler's panel: how many drafts it made (and kept, when pruned), what the cache skipped and the drafts' mean
// seconds (the search's cost payload), its cost against full best-of-N, the budget's choice, and the drafts playing
// in a strip. Exports only: ComfyUI loads every script under web/ as an extension, and this one registers nothing.
import { element, wrappedLines } from "./cachedsearch_dom.js";
import { FONT, LINE_HEIGHT, show } from "./cachedsearch_panel.js";
import { createPlayer } from "./cachedsearch_player.js";
import { enlarge } from "./cachedsearch_pick_ui.js";
import {
  budgetLine, cacheText, CALLS_TITLE, candidateRows, costLine, describe, droppedText, framesOf, pruneRounds,
  roundsDropping, roundsLine, savingText,
} from "./cachedsearch_rows.js";

// A link to this node's doc page, opened as a page in a new tab (web/docs/page.html draws the node's
// web/docs/<node>.md; its links to the other pages work there, and it reloads and can be bookmarked).
function docLink(node, text) {
  const link = element("a", text, "cachedsearch-doc-link");
  const page = `web/docs/${node.comfyClass ?? node.type}.md`;
  link.href = new URL(`../docs/page.html?doc=${encodeURI(page)}`, import.meta.url).href;
  link.target = "_blank";
  link.rel = "noopener";
  return link;
}

// "8 drafts", "4 of 8 drafts kept at step 20 by preview score", or kept in several rounds.
function draftsText(rows, rounds, dropping) {
  const finished = rows.filter((row) => !row.pruned);
  const pruned = rows.filter((row) => row.pruned);
  if (!pruned.length) return `${finished.length} drafts`;
  return dropping.size ? `${finished.length} of ${rows.length} drafts kept by preview score in ${rounds.length} rounds`
    : `${finished.length} of ${rows.length} drafts kept at step ${pruned[0].prune_step} by preview score`;
}

function strip(node, rows, watchable, dropping) {
  const status = element("div", "", "cachedsearch-line cachedsearch-status");
  const figures = element("div", undefined, "cachedsearch-strip");
  for (const row of watchable) {
    const figure = element("figure");
    const fate = row.pruned ? droppedText(row, dropping) : "draft";
    const player = createPlayer(framesOf(row), `${describe(row)}${row.pruned ? `, ${fate}` : ""}: click to enlarge`);
    player.addEventListener("click", () => enlarge(node, rows, row, status, fate));
    // several rounds: the step that dropped it, as the rounds line above names the rounds
    const cut = dropping.has(row.candidate) ? ` ✂${dropping.get(row.candidate).step}` : row.pruned ? " ✂" : "";
    figure.append(player, element("figcaption", `${row.candidate}${cut}`));
    figures.append(figure);
  }
  return [figures, status];
}

// What this search read back from the drafts an earlier run saved on disk (it cost nothing now), as the payload
// words it.
function reuseLine(cost) {
  return typeof cost?.reuse_line === "string" ? ` ${cost.reuse_line}.` : "";
}

// Drafts this search could not write to disk (a full disk, a read-only folder), as the payload words it.
function notKeptLine(cost) {
  return typeof cost?.drafts_not_kept === "string" ? ` ${cost.drafts_not_kept}.` : "";
}

export function renderDrafts(node, output) {
  const given = output.cachedsearch_drafts;
  if (!Array.isArray(given) || given.length === 0) return false;
  const rows = candidateRows(given.map((row) => ({ ...row })), output);
  const cost = output.cachedsearch_cost?.[0];
  const rounds = pruneRounds(output);
  const dropping = roundsDropping(rounds);
  const mean = typeof cost?.mean_draft_seconds === "number" ? `mean ${cost.mean_draft_seconds.toFixed(2)} s per draft` : "";
  const budget = budgetLine(output.cachedsearch_budget?.[0]);
  const text = `${[draftsText(rows, rounds, dropping), savingText(cost), mean].filter(Boolean).join(", ")}.` +
    `${reuseLine(cost)}${notKeptLine(cost)}${costLine(cost)}${cacheText(cost)}${budget ? ` ${budget[0].toUpperCase()}${budget.slice(1)}.` : ""}`;
  const content = element("div");
  const summary = element("div", text, "cachedsearch-summary");
  summary.title = CALLS_TITLE;
  if (cost) summary.append(" ", docLink(node, "cost details"));
  const roundsSummary = roundsLine(rounds);
  content.append(summary, ...(roundsSummary ? [roundsSummary] : []));
  const watchable = rows.filter((row) => framesOf(row).length);
  if (watchable.length) content.append(...strip(node, rows, watchable, dropping));
  show(node, content, (width) => {
    const perLine = Math.max(1, Math.floor(width / 67));
    const stripHeight = watchable.length ? Math.ceil(watchable.length / perLine) * 55 + LINE_HEIGHT + 4 : 0;
    const roundsHeight = roundsSummary ? LINE_HEIGHT * wrappedLines(roundsSummary.textContent, width, FONT) + 4 : 0;
    return 8 + LINE_HEIGHT * wrappedLines(`${text} cost details`, width, FONT) + roundsHeight + stripHeight;
  });
  return true;
}
