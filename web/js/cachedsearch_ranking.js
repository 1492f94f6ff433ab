// The Verifier's panel (and the video verifier's and Combine Scores'): the candidates ranked, each with its draft
// playing, seed, score, margin, preview score, the share of calls the cache skipped, its seconds and the pick
// buttons; the note under the table says what a pick costs. Exports only: ComfyUI loads every script under web/
// as an extension, and this one registers nothing.
import { element, wrappedLines } from "./cachedsearch_dom.js";
import { FONT, LINE_HEIGHT, show } from "./cachedsearch_panel.js";
import { createPlayer } from "./cachedsearch_player.js";
import { enlarge, pickActions, pickNote, pickStatus } from "./cachedsearch_pick_ui.js";
import {
  candidateRows, describe, droppedText, framesOf, pruneRounds, roundScoresTitle, roundsDropping, roundsLine,
  shareText, shortSeed, signed,
} from "./cachedsearch_rows.js";
import { runNavigation } from "./cachedsearch_run_view.js";

// What the ranking table's less obvious columns mean, on hover.
const HEADER_TOOLTIPS = {
  preview: "Preview score at the prune step: compare previews with previews, not with final scores",
  skipped: "Share of this draft's transformer calls the cache skipped",
  time: "Seconds this draft took on this machine",
};

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

function verifierLine(output) {
  const verifier = output.cachedsearch_verifier?.[0];
  if (!verifier?.name) return undefined;
  const direction = verifier.higher_is_better === false ? "lower is better" : "higher is better";
  const sound = verifier.sound_not_judged ? "; pictures only, the sound is not judged" : "";
  return element("div", `${verifier.name} score, ${direction}${verifier.scale ? `: ${verifier.scale}` : ""}${sound}`,
    "cachedsearch-line cachedsearch-verifier");
}

// The share of a draft's calls the cache skipped; per stage for a trajectory of several, each stage's calls on hover.
function skippedCell(row) {
  const cell = element("td", shareText(row.skipped_share));
  if (Array.isArray(row.stages) && row.stages.length > 1) {
    cell.textContent = row.stages.map((stage) => shareText(stage.skipped_share)).join("/");
    cell.title = row.stages.map((stage) => `${stage.stage}: ${stage.skipped} of ${stage.calls} calls skipped`).join("; ");
  }
  return cell;
}

function pickCell(node, rows, row, status) {
  const cell = element("td", undefined, "pick");
  for (const action of pickActions(node, rows, row, status)) {
    const button = element("button", action.mode === "keep" ? "keep" : "commit", action.className);
    button.title = action.title;
    button.addEventListener("click", (event) => {
      event.stopPropagation();
      action.run();
    });
    cell.append(button);
  }
  return cell;
}

// The scored and the pruned rows in the table's order: each row's `place` in the payload (the finished candidates by
// rank, then the pruned ones); a payload older than `place` keeps its rows' order (candidate order).
function tableOrder(rows) {
  const shown = rows.filter((row) => row.pruned || typeof row.score === "number");
  return shown.every((row) => typeof row.place === "number") ? shown.sort((a, b) => a.place - b.place) : shown;
}

// What the table shows besides the fixed columns: VideoScore's aspects or each verifier behind a combined score
// (`extra`), margins, preview scores; and the scores' range, for the bars.
function tableLayout(rows, rounds, dropping) {
  const ranked = rows.filter((row) => !row.pruned && typeof row.score === "number");
  const scores = ranked.map((row) => row.score);
  return {
    extra: ranked[0]?.columns && typeof ranked[0].columns === "object" ? Object.keys(ranked[0].columns) : [],
    hasMargin: ranked.some((row) => typeof row.margin === "number"),
    hasPreview: rows.some((row) => typeof row.preview_score === "number"),
    low: Math.min(...scores),
    high: Math.max(...scores),
    rounds,
    dropping,
  };
}

function headerRow(layout) {
  const header = element("tr");
  const titles = ["", "#", "seed", ...layout.extra, "score", ...(layout.hasMargin ? ["margin"] : []),
    ...(layout.hasPreview ? ["preview"] : []), "skipped", "time", "pick"];
  for (const title of titles) {
    const cell = element("th", title);
    if (HEADER_TOOLTIPS[title]) cell.title = HEADER_TOOLTIPS[title];
    header.append(cell);
  }
  return header;
}

function thumbnailCell(node, rows, row, status, dropping) {
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
  return thumbnail;
}

// The score with its bar (a pruned row: when it was dropped), and the margin; a row dropped in one of several rounds
// takes the margin's room too: it has no margin, and the table stays narrow.
function scoreCells(row, layout) {
  const { dropping, rounds } = layout;
  const score = element("td", row.pruned ? droppedText(row, dropping) : row.score.toFixed(3), "score");
  if (!row.pruned && layout.high > layout.low) {
    const bar = element("div", undefined, "bar");
    bar.style.width = `${Math.round((100 * (row.score - layout.low)) / (layout.high - layout.low))}%`;
    score.append(bar);
  }
  if (row.pruned) score.title = `pruned at step ${row.prune_step ?? "?"}${dropping.has(row.candidate)
    ? ` (round ${dropping.get(row.candidate).number} of ${rounds.length})` : ""}: no final score`;
  if (!layout.hasMargin) return [score];
  if (dropping.has(row.candidate)) {
    score.colSpan = 2;
    return [score];
  }
  const margin = element("td", typeof row.margin === "number" ? signed(row.margin) : "-", "margin");
  margin.title = row.winner ? "ahead of the runner-up" : "behind the winner";
  return [score, margin];
}

function tableRow(node, rows, row, status, layout) {
  const line = element("tr", undefined, row.pruned ? "pruned" : row.winner ? "candidate winner" : "candidate");
  line.dataset.seed = row.seed;
  line.dataset.candidate = row.candidate;
  if (!row.pruned) line.dataset.score = row.score;
  line.append(thumbnailCell(node, rows, row, status, layout.dropping),
    element("td", `${row.winner ? "★ " : ""}${row.candidate ?? "–"}`), seedCell(row.seed));
  for (const name of layout.extra) {
    const value = row.columns?.[name];
    const cell = element("td", typeof value === "number" ? value.toFixed(3) : "-");
    cell.dataset.column = name;
    line.append(cell);
  }
  line.append(...scoreCells(row, layout));
  if (layout.hasPreview) {
    const preview = element("td", typeof row.preview_score === "number" ? row.preview_score.toFixed(3) : "-", "preview");
    preview.title = roundScoresTitle(row, layout.dropping);
    line.append(preview);
  }
  line.append(skippedCell(row), element("td", typeof row.seconds === "number" ? row.seconds.toFixed(1) : "-"));
  line.append(pickCell(node, rows, row, status));
  return line;
}

export function renderRanking(node, output) {
  const given = output.cachedsearch_ranking;
  if (!Array.isArray(given) || given.length === 0) return false;
  const rows = candidateRows(given.map((row) => ({ ...row })), output);
  const rounds = pruneRounds(output);
  const dropping = roundsDropping(rounds);
  const layout = tableLayout(rows, rounds, dropping);
  const status = pickStatus(node);
  const table = element("table");
  table.append(headerRow(layout), ...tableOrder(rows).map((row) => tableRow(node, rows, row, status, layout)));
  const content = element("div");
  const lines = [verifierLine(output), roundsLine(rounds)].filter(Boolean);
  const note = pickNote(node, rows);
  content.append(runNavigation(node), ...lines, table, note, status);
  const rowHeight = rows.some((row) => framesOf(row).length) ? 40 : 19;
  show(node, content, (width) => 2 * LINE_HEIGHT + 8 + 20 + rowHeight * rows.length +
    lines.reduce((sum, line) => sum + LINE_HEIGHT * wrappedLines(line.textContent, width, FONT) + 4, 0) +
    LINE_HEIGHT * wrappedLines(note.textContent, width, FONT) + 4);
  return true;
}
