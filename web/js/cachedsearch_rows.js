// Readers of a search's UI payloads: the candidates' rows, a pruned search's rounds, the cost and the budget, as
// the panels word them. Every number shown is one the payload carries (shares, factors and means come from the
// server's cost model); fields an older CachedSearch did not send are left out. Exports only: ComfyUI loads every
// script under web/ as an extension, and this one registers nothing.
import { element } from "./cachedsearch_dom.js";

const SEED_DIGITS_SHOWN = 6; // consecutive candidates differ in their last digits

export const shareText = (share) => (typeof share === "number" ? `${Math.round(100 * share)}%` : "-");
export const signed = (value) => `${value >= 0 ? "+" : "−"}${Math.abs(value).toFixed(3)}`;

export function shortSeed(seed) {
  const text = String(seed);
  return text.length > SEED_DIGITS_SHOWN + 2 ? `…${text.slice(-SEED_DIGITS_SHOWN)}` : text;
}

export function describe(row) {
  return `candidate ${row.candidate ?? "?"} (seed ${row.seed})`;
}

// A row's frames; a frame whose reference names another seed than the row's is refused (a panel never shows a
// picture as a seed it is not). References of an older CachedSearch name no seed.
export function framesOf(row) {
  const ours = (frame) => frame?.seed === undefined || String(frame.seed) === String(row.seed);
  return Array.isArray(row.frames) ? row.frames.filter((frame) => frame?.filename && ours(frame)) : [];
}

// Rows of a ranking or a draft list, candidates numbered in seed order by the payload (pruned ones included).
// Payloads of an older CachedSearch listed the pruned candidates apart (cachedsearch_pruned), without numbers: they
// follow the rows as they came, numberless.
export function candidateRows(rows, output) {
  const listed = rows.filter((row) => row && typeof row === "object");
  const pruned = listed.some((row) => row.pruned) ? [] : (Array.isArray(output.cachedsearch_pruned)
    ? output.cachedsearch_pruned.map((row) => ({ ...row, pruned: true })) : []);
  const all = [...listed, ...pruned];
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
export function pruneRounds(output) {
  const rounds = output.cachedsearch_pruning?.[0]?.rounds;
  const valid = (round) => typeof round?.step === "number" &&
    ["scored", "kept", "dropped"].every((name) => Array.isArray(round[name]));
  return Array.isArray(rounds) && rounds.every(valid) ? rounds : [];
}

// Where a search pruned in several rounds: each dropped candidate's round, by candidate number. A single prune
// reads as it always did ("pruned" and its step), so it gets none.
export function roundsDropping(rounds) {
  const byCandidate = new Map();
  if (rounds.length < 2) return byCandidate;
  rounds.forEach((round, index) => {
    for (const candidate of round.dropped) byCandidate.set(candidate, { number: index + 1, step: round.step });
  });
  return byCandidate;
}

// A pruned row in a few words: when it was dropped, with its round where there were several (✂ as on the
// Sampler's captions, so that the table keeps to the room a Verifier is laid out with).
export function droppedText(row, dropping) {
  const round = dropping.get(row.candidate);
  return round ? `✂ step ${round.step} (round ${round.number})` : "pruned";
}

// One line for a search pruned in several rounds: "rounds: step 6 kept 8 of 16 · step 10 kept 4 of 8", who each
// round dropped on hover; undefined for a single prune or none.
export function roundsLine(rounds) {
  if (rounds.length < 2) return undefined;
  const kept = (round) => `step ${round.step} kept ${round.kept.length} of ${round.scored.length}`;
  const text = `rounds: ${rounds.map(kept).join(" · ")}`;
  const line = element("div", text, "cachedsearch-line cachedsearch-rounds");
  line.title = rounds.map((round, index) => `round ${index + 1} at step ${round.step} dropped candidates ` +
    `${round.dropped.join(", ") || "none"} on their preview scores`).join("\n");
  return line;
}

// The preview scores a row had at each round it reached, for its preview cell's tooltip.
export function roundScoresTitle(row, dropping) {
  if (!Array.isArray(row.round_scores) || row.round_scores.length === 0) return "";
  const last = row.round_scores.length - 1;
  const verdict = dropping.has(row.candidate) ? "dropped here" : "kept";
  return "preview score " + row.round_scores.map((entry, index) => `at step ${entry.step}: ` +
    `${typeof entry.score === "number" ? entry.score.toFixed(4) : "-"}${index === last ? ` (${verdict})` : ""}`)
    .join("; ");
}

// What the cache skipped of the finished drafts' calls, from the search's cost ("42% of transformer calls skipped
// (high noise 36%, low noise 48%) (~1.72x fewer)"); undefined where the payload has no such figures.
export function savingText(cost) {
  if (!cost || !("fewer_calls_factor" in cost)) return undefined;
  if (typeof cost.fewer_calls_factor !== "number") return "no transformer calls skipped";
  const stages = Array.isArray(cost.stage_skipped_shares) && cost.stage_skipped_shares.length > 1
    ? ` (${cost.stage_skipped_shares.map((stage) => `${stage.stage} ${shareText(stage.share)}`).join(", ")})` : "";
  return `${shareText(cost.skipped_share)} of transformer calls skipped${stages} ` +
    `(~${cost.fewer_calls_factor.toFixed(2)}x fewer)`;
}

// The search's calls whichever run computed them, and their share of full best-of-N: a run that read its drafts
// back from disk (a pick after ComfyUI dropped them, or a restart) computed none, yet the search cost what it did.
// A payload older than these fields named only this run's.
export function draftedCost(cost) {
  return { calls: cost?.drafted_calls ?? cost?.search_calls, ratio: cost?.drafted_ratio ?? cost?.calls_ratio };
}

// The search's cost from the one cost model, in two short sentences; the seconds and why calls lead are on the
// node's doc page.
export function costLine(cost) {
  if (!cost || typeof cost.calls_ratio !== "number") return "";
  const drafted = draftedCost(cost);
  const thisRun = cost.drafted_by_this_run === false ? `; this run computed ${cost.search_calls}` : "";
  const calls = typeof drafted.calls === "number" && typeof cost.full_calls === "number"
    ? ` (${drafted.calls} of ${cost.full_calls} transformer calls${thisRun})` : "";
  const commit = cost.commit_free ? " A commit adds nothing: every draft already is full compute."
    : typeof cost.commit_calls === "number" ? ` A commit adds ${cost.commit_calls} calls.` : "";
  return ` The drafts cost ${Math.round(100 * drafted.ratio)}% of full best-of-${cost.num_candidates ?? "N"}` +
    `${calls}.${commit}${overFullText(cost)}`;
}

// What the panels count their cost in, shown on hover over their cost figures.
export const CALLS_TITLE = "A transformer call is one pass of the video model (per step, per guidance batch); on a " +
  "GPU the calls set the time, so the cost is counted in them. The seconds measured here: the node's report.";

// The cache the drafts ran with, as the search's report names it (ComfyUI's EasyCache or LazyCache too), after
// "Cache:" without saying "cache" twice ("cache adaptive tau 0.3 ..." -> "Cache: adaptive, tau 0.3 ...").
export function cacheText(cost) {
  if (typeof cost?.cache !== "string") return "";
  const named = cost.cache.replace(/\bcache (adaptive|static) /g, "$1, ").replace(/^cache off:/, "off:")
    .replace(/^no cache on/, "none on");
  return ` Cache: ${named}.`;
}

// What to change when the cache skipped too little: CachedSearch's own cache is tuned on Apply Cache, whose warmup
// and cooldown steps ComfyUI's caches lack; a payload that does not say which gets the advice that fits both.
const APPLY_CACHE_ADVICE = "on Apply Cache lower warmup_steps and cooldown_steps (they cover most steps of a short " +
  "graph) or raise tau";
const THRESHOLD_ADVICE = "raise the cache's threshold";

// Why a search with its commit cost more than full best-of-N, and what to do: one sentence; "" when it did not (or
// the payload, older than over_full_best_of, does not say).
export function overFullText(cost) {
  if (cost?.over_full_best_of !== true) return "";
  const skipped = typeof cost.skipped_share === "number" ? `only ${shareText(cost.skipped_share)}` : "too few calls";
  const advice = cost.drafted_with_apply_cache ? APPLY_CACHE_ADVICE : THRESHOLD_ADVICE;
  return ` With the commit that is more than full best-of-${cost.num_candidates ?? "N"} ` +
    `(${cost.drafted_calls_with_commit} of ${cost.full_calls} calls): the cache skipped ${skipped}, too little to pay ` +
    `for the commit; ${advice}, or search without it.`;
}

// A fixed-budget search's choice: N, what it predicted against best-of-M, the break-even width.
function budgetAmount(value, unit) {
  return unit === "wall time" ? `${value.toFixed(2)} s` : `${Math.round(value)} calls`;
}

export function budgetLine(budget, measuredCommit) {
  if (!budget || typeof budget.full_cost !== "number") return "";
  const amount = (value) => budgetAmount(value, budget.unit);
  const breakEven = typeof budget.break_even_width === "number" ? `, N* ${budget.break_even_width.toFixed(2)}` : "";
  const wallTime = budget.deterministic ? "" : ", N depends on wall time";
  let line = `budget best-of-${budget.rollouts} (${amount(budget.budget)}): N = ${budget.width}, predicted ` +
    `${amount(budget.predicted_total)}${breakEven}${wallTime}`;
  if (typeof measuredCommit === "number") {
    line += `; recommit predicted ${amount(budget.full_cost)}, measured ${amount(measuredCommit)}`;
  }
  return line + autoText(budget);
}

// Budget "auto": the calibration's choice or why none applies (the payload's line), and for a pruned auto search
// the calls charged against the budget and what was narrowed.
function autoText(budget) {
  const auto = budget.auto;
  if (!auto) return "";
  const previews = auto.spent_previews ? ` + previews worth ${auto.spent_previews.toFixed(1)}` : "";
  const charged = typeof auto.spent_calls === "number" ? `; charged ${auto.spent_calls}${previews} + commit ` +
    `${Math.round(budget.full_cost)} of ${Math.round(budget.budget)} calls` : "";
  return `; ${auto.line}${charged}${(auto.narrowed ?? []).map((note) => `; ${note}`).join("")}`;
}

export function chooserLine(delivery) {
  const choice = delivery.verifier_choice;
  if (delivery.picked_by === "you") {
    const preferred = choice ? `; the verifier preferred candidate ${choice.candidate} (seed ${choice.seed})` : "";
    return `picked by you: candidate ${delivery.candidate} (seed ${delivery.seed})${preferred}`;
  }
  return delivery.picked_by === "verifier" ? "picked by the verifier" : "";
}
