// The panels across a server restart (#53 items 1, 2, 4, 5) in headless Debian Chromium: a search runs, the server
// restarts under the open tab (the test stops it and starts a new process on the same base directory and port when
// this script prints "restart", and answers on stdin), a second search runs, and the first run's workflow is
// loaded again: each draft's frames in its large view are compared with those the first run showed for that seed.
// Then "Commit this" on a draft of that first run (the server no longer has it), what the panels say of the cost
// after it, and a search cancelled while it drafts. Prints one JSON object with what it saw (its last line).
// Usage: node check_restart.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import {
  loadWorkflow, openChromium, openWorkflow, pressCancelAt as pressCancelAtOf, recordExtensionErrors, settled,
  setWidget as setWidgetOf,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], failed: {} };
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);
// Routing turns Chromium's HTTP cache off: every frame shown is what the server has now, as in a fresh tab.
await page.route("**/view?**", (route) => route.continue());
const setWidget = (type, name, value) => setWidgetOf(page, type, name, value);
const pressCancelAt = (place) => pressCancelAtOf(page, place);

// Queues the loaded graph as the Run button does; resolves with how the run ended and its prompt id.
const runGraph = () => page.evaluate(() => new Promise((resolve) => {
  const api = window.comfyAPI.api.api;
  let promptId;
  const started = ({ detail }) => { promptId ??= detail?.prompt_id; };
  const events = ["execution_success", "execution_interrupted", "execution_error"];
  const ended = (event) => {
    if (promptId && event.detail?.prompt_id !== promptId) return;
    for (const name of events) api.removeEventListener(name, ended);
    api.removeEventListener("execution_start", started);
    resolve({ end: event.type, promptId });
  };
  api.addEventListener("execution_start", started);
  for (const name of events) api.addEventListener(name, ended);
  window.app.queuePrompt(0, 1);
}));

const panelOf = (type) => page.evaluate((type) => window.app.graph.nodes.find((n) => n.type === type)
  .widgets.find((w) => w.name === "cachedsearch_results")?.element.textContent ?? null, type);

// Scrolls the canvas so the first node of `type` is at the top left, at 100 %.
async function showNode(type) {
  await page.evaluate((type) => {
    const node = window.app.graph.nodes.find((n) => n.type === type);
    window.app.canvas.ds.scale = 1;
    window.app.canvas.ds.offset = [80 - node.pos[0], 120 - node.pos[1]];
    window.app.canvas.setDirty(true, true);
  }, type);
  await settled(page, `the view on ${type}`);
}

// SHA-256 (hex) of what the server sends for image URL `src`; "missing" when it has none.
const digestOf = (src) => page.evaluate(async (src) => {
  const response = await fetch(src, { cache: "no-store" });
  if (!response.ok) return "missing";
  const digest = await crypto.subtle.digest("SHA-256", await response.arrayBuffer());
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}, src);

// What the first run's Verifier payload says each seed's frames are: {seed: [digest, ...]}, fetched now.
async function framesBySeed() {
  const references = await page.evaluate(() => {
    const node = window.app.graph.nodes.find((n) => n.type === "CachedSearchVerifier");
    const api = window.comfyAPI.api.api;
    return node.properties.cachedsearch_last_output.cachedsearch_ranking.map((row) => [row.seed, row.frames.map(
      (frame) => api.apiURL(`/view?${new URLSearchParams({ filename: frame.filename, subfolder: frame.subfolder ?? "",
        type: frame.type ?? "temp" })}`))]);
  });
  const seen = {};
  for (const [seed, urls] of references) {
    seen[seed] = [];
    for (const src of urls) seen[seed].push(await digestOf(src));
  }
  return seen;
}

// Each Verifier row's large view, frame by frame, as the artist steps through it: its caption and, per frame, the
// digest of the picture shown or "missing" where the view says the frame is not available.
async function largeViews() {
  const views = [];
  const count = await page.$$eval(".cachedsearch-panel tr[data-candidate]", (rows) => rows.length);
  for (let index = 0; index < count; index += 1) {
    const row = page.locator(".cachedsearch-panel tr[data-candidate]").nth(index);
    const seed = await row.getAttribute("data-seed");
    const player = row.locator("img.cachedsearch-player");
    const view = { seed, small: await row.locator(".cachedsearch-missing").count() ? "missing" : "shown", frames: [] };
    if (await player.count() === 0) {
      views.push(view);
      continue;
    }
    await player.evaluate((img) => img.click());
    await page.waitForSelector(".cachedsearch-overlay", { timeout: 10000 });
    view.caption = await page.$eval(".cachedsearch-caption", (line) => line.textContent);
    await page.evaluate(() => {
      const play = document.querySelector(".cachedsearch-play");
      if (play.textContent.includes("pause")) play.click();
    });
    const total = Number((await page.$eval(".cachedsearch-frame-counter", (c) => c.textContent)).split("/ ")[1]);
    view.frames = new Array(total).fill("unseen");
    for (let step = 0; step < total; step += 1) {
      if (step > 0) await page.evaluate(() => document.querySelector(".cachedsearch-next").click());
      const shown = await page.waitForFunction(() => {
        const picture = document.querySelector("img.cachedsearch-large");
        const missing = document.querySelector(".cachedsearch-missing-large");
        const at = Number(document.querySelector(".cachedsearch-frame-counter").textContent.split(" ")[1]) - 1;
        if (missing && !missing.hidden) return { at, missing: true };
        return picture.complete && picture.naturalWidth > 0 ? { at, src: picture.src } : null;
      }, null, { timeout: 10000 }).then((handle) => handle.jsonValue()).catch(() => null);
      if (!shown) continue;
      view.frames[shown.at] = shown.missing ? "missing" : await digestOf(shown.src);
    }
    if (index === 2) await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_large_view.png") });
    await page.keyboard.press("Escape");
    views.push(view);
  }
  return views;
}

async function section(name, checks) {
  try {
    await checks();
  } catch (error) {
    result.failed[name] = String(error.message ?? error).split("\n")[0].slice(0, 300);
    await page.keyboard.press("Escape").catch(() => {});
  }
}

try {
  Object.assign(result, await openWorkflow(page, url));
  await page.evaluate(() => window.comfyAPI.api.api.addEventListener("reconnected", () => { window.__reconnected = true; }));
  await loadWorkflow(page, config.workflow);
  result.firstRun = await runGraph();
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-panel img.cachedsearch-player").length >= 3,
    null, { timeout: 60000 });
  await settled(page, "the first run's panels");
  result.firstFrames = await framesBySeed();
  result.firstCost = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchSampler")
    .properties.cachedsearch_last_output.cachedsearch_cost[0]);
  result.firstReferences = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchVerifier")
    .properties.cachedsearch_last_output.cachedsearch_ranking.map((row) => ({ seed: row.seed, frames: row.frames })));
  // the tab as it stands now: what an open tab, or the workflow saved now, keeps of the first run
  const firstWorkflow = await page.evaluate(() => window.app.graph.serialize());

  console.log(JSON.stringify({ restart: true, references: result.firstReferences }));
  await lines.next(); // the server was restarted on the same port
  await page.waitForFunction(() => window.__reconnected, null, { timeout: 120000 });
  // the page reloaded (its images in memory gone), as a tab opened after the restart is: the first run's panels
  // come back with the workflow below
  await page.reload();
  await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
  await loadWorkflow(page, firstWorkflow);

  await section("item 1", async () => {
    // a second search in the restarted server, then the first run's workflow again: its frames are its own
    const seed = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchSampler")
      .widgets.find((w) => w.name === "seed").value);
    await setWidget("CachedSearchSampler", "seed", seed + 10);
    result.secondRun = await runGraph();
    await settled(page, "the second run's panels");
    await loadWorkflow(page, firstWorkflow);
    await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-panel tr[data-candidate]").length >= 3,
      null, { timeout: 30000 });
    await showNode("CachedSearchVerifier");
    // a missing frame shows as a note (the small player gives way): give every player its first load
    await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel tr[data-candidate] td:first-child")]
      .every((cell) => cell.querySelector(".cachedsearch-missing") ||
        [...cell.querySelectorAll("img")].every((img) => img.complete && img.naturalWidth > 0)), null, { timeout: 30000 });
    await settled(page, "the first run's panels after the restart");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_verifier.png") });
    result.largeViews = await largeViews();
  });

  await section("item 2", async () => {
    // "Commit this" on a draft the verifier did not choose, from the first run's panel: the server has no such run
    await showNode("CachedSearchVerifier");
    result.noteBeforePick = await page.$eval(".cachedsearch-pick-note", (note) => note.textContent);
    const row = page.locator(".cachedsearch-panel tr.candidate:not(.winner)").first();
    result.picked = { candidate: Number(await row.getAttribute("data-candidate")), seed: Number(await row.getAttribute("data-seed")) };
    await page.evaluate(() => {
      const api = window.comfyAPI.api.api;
      window.__ends = {};
      api.addEventListener("execution_start", ({ detail }) => { window.__pickRun ??= detail?.prompt_id; });
      for (const name of ["execution_success", "execution_interrupted", "execution_error"]) {
        api.addEventListener(name, ({ detail }) => { window.__ends[detail?.prompt_id] = name; });
      }
    });
    await row.locator("button.cachedsearch-pick-commit").evaluate((button) => button.click());
    // the click's answer: the pick queued (its wording follows the run), or why it could not
    await page.waitForFunction(() => /^Could not|(commit|keep) candidate/.test(
      document.querySelector(".cachedsearch-status")?.textContent ?? ""), null, { timeout: 30000 });
    result.pickStatus = await page.$eval(".cachedsearch-status", (line) => line.textContent);
    if (result.pickStatus.startsWith("Could not")) return;
    await page.waitForFunction(() => window.__pickRun && window.__ends[window.__pickRun], null, { timeout: 300000 });
    [result.pickPromptId, result.pickEnd] = await page.evaluate(() => [window.__pickRun, window.__ends[window.__pickRun]]);
    await page.waitForFunction(() => (document.querySelector(".cachedsearch-status")?.textContent ?? "").includes(": "),
      null, { timeout: 30000 }).catch(() => {});
    await settled(page, "the panels after the pick");
    result.pickStatusAfter = await page.$eval(".cachedsearch-status", (line) => line.textContent).catch(() => null);
    // item 5: the search's cost with the pick's beside it
    result.samplerAfterPick = await panelOf("CachedSearchSampler");
    result.recommitAfterPick = await panelOf("CachedSearchRecommit");
    await showNode("CachedSearchSampler");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_after_pick.png") });
    await showNode("CachedSearchRecommit");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_recommit_after_pick.png") });
  });

  await section("item 4", async () => {
    // a new search cancelled while it drafts: no panel goes on showing the run before as the newest
    const seed = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchSampler")
      .widgets.find((w) => w.name === "seed").value);
    await setWidget("CachedSearchSampler", "seed", seed + 20);
    // the server presses Cancel (sets the flag POST /interrupt sets) at the second draft's third transformer call
    // (the test's CachedSearchTestPressCancel node): a Cancel sent from here on a progress event lands wherever the
    // server has got to by then, under load after the Sampler finished
    await pressCancelAt({ run: 2, call: 3 });
    result.cancelledRun = await runGraph();
    await settled(page, "the panels after the cancel");
    result.afterCancel = {};
    for (const type of ["CachedSearchSampler", "CachedSearchVerifier", "CachedSearchRecommit"]) {
      // the panels answer the run's end once they fetched it from the history: a slow server takes its time
      await page.waitForFunction((type) => /cancel|stopped/i.test(window.app.graph.nodes.find((n) => n.type === type)
        .widgets.find((w) => w.name === "cachedsearch_results")?.element.textContent ?? ""), type, { timeout: 120000 })
        .catch(() => {});
      result.afterCancel[type] = await panelOf(type);
    }
    // the product's own wording of a panel the cancelled run stopped before, from the module the server lists
    result.cancelledText = await page.evaluate(async () => {
      const scripts = await (await window.comfyAPI.api.api.fetchApi("/extensions")).json();
      const runView = scripts.find((path) => path.endsWith("/cachedsearch_run_view.js"));
      return (await import(new URL(runView, window.location.href).href)).stoppedText(false);
    });
    await showNode("CachedSearchVerifier");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_cancelled.png") });
    // "‹ earlier" from there shows the run before, as an earlier run
    const earlier = page.locator(".cachedsearch-panel button.cachedsearch-earlier").first();
    if (await earlier.count()) {
      await earlier.evaluate((button) => button.click());
      await page.waitForFunction(() => document.querySelector(".cachedsearch-runs span")?.textContent.startsWith("earlier run"),
        null, { timeout: 120000 }).catch(() => {}); // the history lookup behind it takes its time on a busy server
      result.browsedAfterCancel = await page.$eval(".cachedsearch-runs span", (span) => span.textContent).catch(() => null);
      result.verifierBrowsed = await panelOf("CachedSearchVerifier");
    }
  });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
process.exit(0);
