// Loads the example workflows and runs a tiny search in headless Debian Chromium against a real
// ComfyUI server; prints one JSON object with what it saw. Usage: node check_ui.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  nextRun as nextRunOn, openChromium, openWorkflow, progressTexts as progressTextsOf, recordDeprecatedUse, settled,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, missing: {}, loadWarnings: {}, extensionErrors: [], rows: [], served: [],
  panels: [], overlay: false, toleranceErrors: [], rowsAfterReload: 0, clipped: [], clippedAfterRun: [], storedPanels: [],
  reusedRows: 0, reusedPanels: [], seedRuns: [], missingInProbes: {}, missingPackDetails: null, layout: {}, player: null, pick: null,
  wait: null, earlier: null, storedRounds: null };
const consoleMessages = [];

const { context, page } = await openChromium();
// Errors raised by our script (its URL in the location or stack), not the frontend's own network noise.
const fromExtension = (where) => where.includes("/extensions/cachedsearch/");
page.on("console", (message) => {
  if (message.type() === "error" && fromExtension(message.location()?.url ?? "")) result.extensionErrors.push(message.text());
  // Blocked network requests (no internet here) are the sandbox's, not a workflow's.
  if (["warning", "error"].includes(message.type()) && !message.text().includes("Content Security Policy")) {
    consoleMessages.push(`${message.type()}: ${message.text()}`);
  }
});
page.on("pageerror", (error) => {
  if (fromExtension(error.stack ?? "")) result.extensionErrors.push(error.message);
});
await recordDeprecatedUse(page, result.extensionErrors);

// Panels (a summary or a ranking table) whose content does not fit the height the node gives them (clipped, or
// scrolled for a table) at the node's current width.
const clippedPanels = () => page.$$eval(".cachedsearch-panel", (panels) => panels
  .filter((panel) => panel.offsetParent !== null && panel.scrollHeight > panel.clientHeight + 1)
  .map((panel) => `${panel.textContent.slice(0, 80)} (${panel.scrollHeight} px in ${panel.clientHeight} px)`));

const panelTexts = () => page.$$eval(".cachedsearch-panel", (panels) => panels.map((panel) => panel.textContent));

// Where nodes, their panels and groups lie (graph coordinates) and what does not fit: pairs of nodes that overlap,
// panels that reach outside their node or into another, nodes reaching out of a group they touch, overlapping
// groups, and tables or summaries clipped in width or height. Nodes 2.0 is measured on its DOM nodes (its
// heights differ from the classic canvas's); the classic canvas on the graph's node boxes and title height.
const layoutProblems = () => page.evaluate(() => {
  const canvas = window.app.canvas;
  const graph = window.app.graph;
  const origin = canvas.canvas.getBoundingClientRect();
  const scale = canvas.ds.scale;
  const [offsetX, offsetY] = canvas.ds.offset;
  const toGraph = (r) => ({ x: (r.left - origin.left) / scale - offsetX, y: (r.top - origin.top) / scale - offsetY,
    w: r.width / scale, h: r.height / scale });
  const titleHeight = window.LiteGraph.NODE_TITLE_HEIGHT ?? 30;
  const vueNodes = document.querySelector("[data-node-id]") !== null;
  const name = (node) => `${node.title ?? node.type} #${node.id}`;
  const boxes = graph.nodes.map((node) => {
    const element = vueNodes && document.querySelector(`[data-node-id="${node.id}"]`);
    const box = element ? toGraph(element.getBoundingClientRect())
      : { x: node.pos[0], y: node.pos[1] - titleHeight, w: node.size[0], h: node.size[1] + titleHeight };
    return { node, box };
  });
  const intersects = (a, b, slack = 1) => a.x + slack < b.x + b.w && b.x + slack < a.x + a.w &&
    a.y + slack < b.y + b.h && b.y + slack < a.y + a.h;
  const contains = (outer, inner, slack = 2) => inner.x >= outer.x - slack && inner.y >= outer.y - slack &&
    inner.x + inner.w <= outer.x + outer.w + slack && inner.y + inner.h <= outer.y + outer.h + slack;
  const problems = { overlaps: [], panelsOutside: [], outOfGroup: [], groupOverlaps: [], clipped: [], panels: 0,
    measuredOnDom: vueNodes };
  for (let i = 0; i < boxes.length; i += 1) {
    for (let j = i + 1; j < boxes.length; j += 1) {
      if (intersects(boxes[i].box, boxes[j].box)) problems.overlaps.push(`${name(boxes[i].node)} / ${name(boxes[j].node)}`);
    }
  }
  for (const { node, box } of boxes) {
    const panel = node.widgets?.find((widget) => widget.name === "cachedsearch_results")?.element;
    if (!panel || panel.offsetParent === null) continue;
    problems.panels += 1;
    const panelBox = toGraph(panel.getBoundingClientRect());
    if (!contains(box, panelBox)) problems.panelsOutside.push(`${name(node)}: ${JSON.stringify(panelBox)} in ${JSON.stringify(box)}`);
    for (const other of boxes) {
      if (other.node !== node && intersects(panelBox, other.box)) problems.overlaps.push(`panel of ${name(node)} / ${name(other.node)}`);
    }
    if (panel.scrollHeight > panel.clientHeight + 1 || panel.scrollWidth > panel.clientWidth + 1) {
      problems.clipped.push(`${name(node)}: ${panel.scrollWidth}x${panel.scrollHeight} px in ${panel.clientWidth}x${panel.clientHeight} px`);
    }
  }
  const groups = (graph._groups ?? graph.groups ?? []).map((group) => {
    const [x, y, w, h] = group._bounding ?? group.bounding;
    return { title: group.title, box: { x, y, w, h } };
  });
  for (let i = 0; i < groups.length; i += 1) {
    for (let j = i + 1; j < groups.length; j += 1) {
      if (intersects(groups[i].box, groups[j].box)) problems.groupOverlaps.push(`${groups[i].title} / ${groups[j].title}`);
    }
    for (const { node, box } of boxes) {
      if (intersects(groups[i].box, box) && !contains(groups[i].box, box)) problems.outOfGroup.push(`${name(node)} / ${groups[i].title}`);
    }
  }
  return problems;
});

// The whole graph in view (all panels laid out), then a redraw.
async function fitGraphInView() {
  await page.evaluate(() => {
    const canvas = window.app.canvas;
    const nodes = window.app.graph.nodes;
    const left = Math.min(...nodes.map((n) => n.pos[0])) - 40;
    const top = Math.min(...nodes.map((n) => n.pos[1])) - 100;
    const right = Math.max(...nodes.map((n) => n.pos[0] + n.size[0])) + 40;
    const bottom = Math.max(...nodes.map((n) => n.pos[1] + n.size[1])) + 40;
    // room for the frontend's side bar and top bar, which lie over the canvas on newer frontends
    const rect = canvas.canvas.getBoundingClientRect();
    const scale = Math.min((rect.width - 120) / (right - left), (rect.height - 180) / (bottom - top), 1);
    canvas.ds.scale = scale;
    canvas.ds.offset[0] = 80 / scale - left;
    canvas.ds.offset[1] = 120 / scale - top;
    canvas.setDirty(true, true);
  });
  await settled(page, "the whole graph in view");
}

// The canvas at 100 % with the nodes of `types` (the first found) at its top left, for a readable screenshot.
async function zoomTo(types) {
  await page.evaluate((types) => {
    const canvas = window.app.canvas;
    const node = window.app.graph.nodes.find((n) => types.includes(n.type));
    if (!node) return;
    canvas.ds.scale = 1;
    canvas.ds.offset[0] = 80 - node.pos[0];
    canvas.ds.offset[1] = 160 - node.pos[1];
    canvas.setDirty(true, true);
  }, types);
  await settled(page, `zoom to ${types[0]}`);
}

async function checkLayout(label, screenshot) {
  await fitGraphInView();
  result.layout[label] = await layoutProblems();
  if (!screenshot) return;
  await page.screenshot({ path: screenshot });
  // the search's columns at 100 %: the sampler's, the verifier's and the Recommit's panels
  await zoomTo(["CachedSearchSampler", "CachedSearchSamplerAdvanced", "CachedSearchSamplerExperts"]);
  await page.screenshot({ path: screenshot.replace(/\.png$/, "_100.png") });
}

// Runs the loaded graph once and waits until it has finished (every queued prompt done).
async function runAndWait(timeout = 600000) {
  await page.evaluate(() => new Promise((resolve, reject) => {
    const api = window.comfyAPI.api.api;
    api.addEventListener("execution_success", () => resolve(), { once: true });
    api.addEventListener("execution_error", ({ detail }) => reject(new Error(JSON.stringify(detail).slice(0, 2000))), { once: true });
    window.app.queuePrompt(0, 1);
  }));
  await settled(page, "the panels after a run");
}

// The next run that start() queues, to its end (chromium.mjs's nextRun: the POST /prompt's body, cached, executed,
// end), waiting up to 10 minutes as every run here may.
const nextRun = (start) => nextRunOn(page, start, 600000);

// Until the server has no prompt running or pending (the runs' panels are shown by then).
async function waitForIdleQueue(timeout = 600000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const idle = await page.evaluate(async () => {
      const queue = await (await window.comfyAPI.api.api.fetchApi("/queue")).json();
      return queue.queue_running.length === 0 && queue.queue_pending.length === 0;
    });
    if (idle) break;
    if (Date.now() > deadline) throw new Error(`the server's queue was not empty after ${timeout} ms`);
    await page.evaluate(() => new Promise((resolve) => {  // the next status message, or a second at most
      const api = window.comfyAPI.api.api;
      const done = () => { api.removeEventListener("status", done); resolve(); };
      api.addEventListener("status", done);
      setTimeout(done, 1000);
    }));
  }
  await settled(page, "the panels once the queue is empty");
}

async function draftSeedsOfNextRuns(count) {
  return page.evaluate(async (count) => {
    const runs = [];
    const done = new Promise((resolve) => {
      window.comfyAPI.api.api.addEventListener("executed", (event) => {
        const rows = event.detail.output?.cachedsearch_drafts;
        if (Array.isArray(rows)) runs.push(rows.map((row) => row.seed));
        if (runs.length === count) resolve();
      });
    });
    await window.app.queuePrompt(0, count);
    await done;
    return runs;
  }, count);
}

// Loads a workflow; returns the node types the frontend does not know. Frontend 1.32 reports them through
// app.showMissingNodesError (replaced here, which also keeps its dialog away); 1.4x and later put them in a store
// and a side panel instead, so the loaded graph itself is read too: a node whose type is not registered is a
// placeholder on every frontend.
async function loadWorkflow(workflow) {
  return page.evaluate(async (data) => {
    const missing = new Set();
    const original = window.app.showMissingNodesError;
    window.app.showMissingNodesError = (types) => types.forEach((t) => missing.add(typeof t === "string" ? t : t.type));
    try {
      await window.app.loadGraphData(data);
    } finally {
      window.app.showMissingNodesError = original;
    }
    const root = window.app.rootGraph ?? window.app.graph;
    for (const graph of [root, ...(root.subgraphs?.values() ?? [])]) {
      for (const node of graph.nodes) {
        // a subgraph node's type is its subgraph's id, defined in the workflow itself
        if (!node.isSubgraphNode?.() && !(node.type in window.LiteGraph.registered_node_types)) missing.add(node.type);
      }
    }
    return [...missing].sort();
  }, workflow);
}

// Until the small player `selector` has moved on `count` frames (its ticker runs on its own timer).
async function waitForFramesOf(selector, count, timeout = 10000) {
  await page.evaluate(([selector, count, timeout]) => new Promise((resolve, reject) => {
    const element = document.querySelector(selector);
    let seen = 0;
    const observer = new MutationObserver(() => {
      seen += 1;
      if (seen >= count) { observer.disconnect(); resolve(); }
    });
    observer.observe(element, { attributes: true, attributeFilter: ["data-frame"] });
    setTimeout(() => { observer.disconnect(); reject(new Error(`${selector} showed ${seen} of ${count} frames`)); }, timeout);
  }), [selector, count, timeout]);
}

const candidateRows = () => page.$$eval(".cachedsearch-panel tr.candidate", (rows) =>
  rows.map((row) => ({ seed: Number(row.dataset.seed), score: Number(row.dataset.score), winner: row.classList.contains("winner") })));

// The Verifier's pick note once it says what a pick costs (`state`: once it says that one): {state, text}; as it
// stands after 30 s if it never does (the test then shows what it said).
async function pickNote(state) {
  try {
    await page.waitForFunction((state) => {
      const note = document.querySelector(".cachedsearch-pick-note");
      return note?.dataset.state !== undefined && (!state || note.dataset.state === state);
    }, state, { timeout: 30000 });
  } catch {
    // reported through the state and text below
  }
  return page.$eval(".cachedsearch-pick-note", (note) => ({ state: note.dataset.state ?? null, text: note.textContent }));
}

// What the panels said a pick did once its run started (the status lines' data-outcome: "reused" or "drafted again").
const pickOutcomes = () => page.$$eval(".cachedsearch-status[data-outcome]", (lines) => lines.map((line) => line.dataset.outcome));

const progressTexts = () => progressTextsOf(page);

async function waitForRows(count, timeout = 30000) {
  try {
    await page.waitForFunction((n) => document.querySelectorAll(".cachedsearch-panel tr.candidate").length >= n,
      count, { timeout });
    return true;
  } catch {
    return false; // reported through the row count the caller reads next
  }
}

try {
  Object.assign(result, await openWorkflow(page, url));
  for (const path of config.workflows) {
    consoleMessages.length = 0;
    result.missing[path] = await loadWorkflow(JSON.parse(readFileSync(path, "utf8")));
    await settled(page, `loading ${path}`);
    result.loadWarnings[path] = [...consoleMessages];
  }

  // Each shipped workflow (tiny weights, N = 8, 16-digit seeds) after a run, or as saved after one: nothing
  // overlaps, nothing is clipped, nothing leaves its group.
  for (const check of config.after_run ?? []) {
    await loadWorkflow(JSON.parse(readFileSync(check.workflow, "utf8")));
    await settled(page, `loading ${check.name}`);
    if (check.live) await runAndWait();
    await checkLayout(check.name, check.screenshot);
  }

  // Results stored in a saved workflow are shown on load, at the default node width, unclipped.
  if (config.stored_workflow) {
  await loadWorkflow(JSON.parse(readFileSync(config.stored_workflow, "utf8")));
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-summary").length >= 2, null, { timeout: 60000 });
  await settled(page, "the stored results");
  result.storedPanels = await panelTexts();
  result.clipped.push(...(await clippedPanels()));
  await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_stored.png") });

  // A draft plays as a short loop; enlarged, it pauses, steps frame by frame and plays again.
  const player = "tr.candidate img.cachedsearch-player";
  if (await page.$(player)) {
    const frameNow = () => page.$eval(player, (img) => Number(img.dataset.frame));
    const first = await frameNow();
    const loops = await page.waitForFunction(([selector, first]) =>
      Number(document.querySelector(selector).dataset.frame) !== first, [player, first], { timeout: 10000 })
      .then(() => true, () => false);
    const counter = () => page.$eval(".cachedsearch-frame-counter", (element) => element.textContent);
    const seen = { frames: await page.$eval(player, (img) => Number(img.dataset.frames)), loops };
    await page.$eval(player, (img) => img.click()); // it may lie outside the viewport
    seen.overlay = (await page.$(".cachedsearch-overlay img.cachedsearch-large")) !== null;
    seen.picks = await page.$$eval(".cachedsearch-overlay .cachedsearch-picks button", (buttons) => buttons.map((b) => b.textContent));
    await page.click(".cachedsearch-overlay .cachedsearch-play");
    seen.paused = await counter();
    // still paused while the small player in the table plays on: wait until it has shown two more frames
    await waitForFramesOf(player, 2);
    seen.stillPaused = await counter();
    await page.click(".cachedsearch-overlay .cachedsearch-next");
    seen.stepped = await counter();
    await page.click(".cachedsearch-overlay .cachedsearch-play");
    await page.waitForFunction((stepped) => document.querySelector(".cachedsearch-frame-counter").textContent !== stepped,
      seen.stepped, { timeout: 10000 }).catch(() => {});  // a counter that never moves fails the test's check
    seen.playing = await counter();
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_enlarged.png") });
    await page.keyboard.press("Escape");
    seen.closed = (await page.$(".cachedsearch-overlay")) === null;
    result.player = seen;
  }
  }

  // A search of 16 drafts pruned in two rounds, as saved: the panels' texts, the preview cells' tooltips (each
  // round's score), what is clipped or overlaps, and screenshots of the whole graph and each panel at 100 %.
  if (config.stored_rounds) {
    const rounds = config.stored_rounds;
    await loadWorkflow(JSON.parse(readFileSync(rounds.workflow, "utf8")));
    await fitGraphInView(); // the classic canvas attaches a DOM widget only while its node is in view
    await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-rounds").length >= 2, null, { timeout: 60000 })
      .catch(() => {}); // a panel without its rounds line fails the test's check on the texts
    await settled(page, "the stored rounds");
    const seen = { panels: await panelTexts(), clipped: await clippedPanels(),
      previewTitles: await page.$$eval(".cachedsearch-panel td.preview", (cells) => cells.map((cell) => cell.title)) };
    await fitGraphInView(); // again, now that the panels have grown
    seen.layout = await layoutProblems();
    await page.screenshot({ path: rounds.screenshot });
    await zoomTo(["CachedSearchSampler", "CachedSearchSamplerAdvanced"]);
    await page.screenshot({ path: rounds.screenshot.replace(/\.png$/, "_sampler_100.png") });
    await zoomTo(["CachedSearchVerifier"]);
    await page.screenshot({ path: rounds.screenshot.replace(/\.png$/, "_verifier_100.png") });
    result.storedRounds = seen;
  }

  // A live search through the Run button, then the artist's side of it: enlarge the winner, "Commit this" on another
  // draft, and the wait mode (Keep answers it, Cancel ends it). Every combination of the matrix runs this.
  if (config.live_pick) {
    await loadWorkflow(JSON.parse(readFileSync(config.tiny_workflow, "utf8")));
    await page.evaluate(() => {
      window.cachedsearchExecuted = [];
      window.comfyAPI.api.api.addEventListener("executed", (event) => window.cachedsearchExecuted.push(event.detail));
    });
    await page.evaluate(() => window.app.queuePrompt(0, 1));
    await page.waitForFunction((n) => document.querySelectorAll(".cachedsearch-panel tr.candidate").length >= n,
      config.candidates, { timeout: 300000 });
    await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel")]
      .some((panel) => panel.textContent.startsWith("delivered seed")), null, { timeout: 300000 });
    await settled(page, "the panels after the live search");
    result.panels = await panelTexts();
    result.clippedAfterRun = await clippedPanels();
    result.rows = await candidateRows();
    result.served = await page.evaluate(() =>
      window.cachedsearchExecuted.map((detail) => detail.output?.cachedsearch_ranking).find(Array.isArray) ?? []);
    result.samplerCost = await page.evaluate(() =>
      window.cachedsearchExecuted.map((detail) => detail.output?.cachedsearch_cost?.[0]).find(Boolean) ?? null);
    result.pickNoteAfterRun = await pickNote();
    result.progressTextsAfterRun = await progressTexts();
    await page.screenshot({ path: config.screenshot });
    await zoomTo(["CachedSearchSampler"]);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_sampler.png") });
    // the clicks below at 100 % on the table, as an artist clicks (at the whole graph's zoom frontend 1.32's
    // Nodes 2.0 draws nodes in low quality and a click on the table reaches no button)
    await zoomTo(["CachedSearchVerifier"]);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_verifier.png") });
    await page.click(".cachedsearch-panel tr.winner img.cachedsearch-player", { force: true });
    result.overlay = (await page.$(".cachedsearch-overlay")) !== null;
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_live_enlarged.png") });
    if (result.overlay) await page.keyboard.press("Escape");

    await waitForIdleQueue(); // the run's last nodes (save) finish after the panels show
    // "Commit this" on a row the verifier did not choose: the exact prompt of that run is queued again with the
    // Recommit told the pick; ComfyUI's cache serves the search and the verifier.
    const verifierNode = () => page.evaluate(() => {
      const node = window.app.graph.nodes.find((n) => n.type === "CachedSearchVerifier");
      return { id: String(node.id), promptId: node.properties.cachedsearch_last_prompt };
    });
    const source = await verifierNode();
    const target = await page.$eval(".cachedsearch-panel tr.candidate:not(.winner)", (row) =>
      ({ candidate: Number(row.dataset.candidate), seed: Number(row.dataset.seed) }));
    const picked = await nextRun(() => page.click(
      `.cachedsearch-panel tr.candidate[data-candidate="${target.candidate}"] button.cachedsearch-pick-commit`, { force: true }));
    result.pick = { ...target, source, sourcePrompt: await page.evaluate(async (id) =>
      (await (await window.comfyAPI.api.api.fetchApi(`/history/${id}`)).json())[id]?.prompt?.[2], source.promptId),
    queued: picked.body, cached: picked.cached, executed: picked.executed, end: picked.end,
    panels: await panelTexts(), outcomes: await pickOutcomes() };
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_picked.png") });

    // The wait mode, live: the Recommit waits in the run for the artist's click (the search and verifier come
    // from ComfyUI's cache), Keep on a draft answers the wait and that run delivers it; a second wait is
    // cancelled with ComfyUI's Cancel, and the run after it completes.
    const recommitId = await page.evaluate(() => String(window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit").id));
    const sourceSeed = Object.values(result.pick.sourcePrompt).find((n) => n.class_type === "CachedSearchSampler").inputs.seed;
    const setInputs = (values) => page.evaluate(([values, seed]) => {
      const recommit = window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit");
      for (const [name, value] of Object.entries(values)) recommit.widgets.find((w) => w.name === name).value = value;
      // the search of the run above, from ComfyUI's cache (`randomize` has changed the seed widget since)
      const sampler = window.app.graph.nodes.find((n) => n.type === "CachedSearchSampler");
      sampler.widgets.find((w) => w.name === "seed").value = seed;
      const control = sampler.widgets.find((w) => w.name === "control_after_generate");
      if (control) control.value = "fixed";
    }, [values, sourceSeed]);
    const queueGraph = () => page.evaluate(() => window.app.queuePrompt(0, 1));
    const banner = () => page.$(".cachedsearch-wait");
    await setInputs({ wait_for_pick: true, pick: 0 });
    const answeredRun = nextRun(queueGraph);
    await page.waitForSelector(".cachedsearch-wait", { timeout: 120000 });
    const wait = { banner: await page.$eval(".cachedsearch-wait", (element) => element.textContent), recommit: recommitId,
      recommitPanel: await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit")
        .widgets.find((w) => w.name === "cachedsearch_results").element.textContent),
      pickNote: await pickNote("waiting"),
      pickTitles: await page.$$eval(".cachedsearch-panel tr.candidate button", (buttons) => buttons.map((b) => b.title)),
      // the product's own wording of what a pick does during a wait, from the module the server lists
      answersTheWait: await page.evaluate(async () => {
        const scripts = await (await window.comfyAPI.api.api.fetchApi("/extensions")).json();
        const pick = scripts.find((path) => path.endsWith("/cachedsearch_pick.js"));
        return (await import(new URL(pick, window.location.href).href)).ANSWERS_THE_WAIT;
      }) };
    await fitGraphInView();
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_waiting.png") });
    await zoomTo(["CachedSearchRecommit"]);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_waiting_recommit.png") });
    // back to 100 % on the table, as an artist clicks (at the whole graph's zoom frontend 1.32's low-quality
    // rendering leaves the buttons a few pixels wide)
    await zoomTo(["CachedSearchVerifier"]);
    await page.click(`.cachedsearch-panel tr.candidate[data-candidate="${target.candidate}"] button.cachedsearch-pick-keep`, { force: true });
    const answered = await answeredRun;
    Object.assign(wait, { end: answered.end, cached: answered.cached,
      delivery: answered.executed[recommitId]?.cachedsearch_delivery?.[0] ?? null, panels: await panelTexts(),
      afterAnswer: (await banner()) !== null });
    const cancelledRun = nextRun(queueGraph);
    await page.waitForSelector(".cachedsearch-wait", { timeout: 120000 });
    await page.evaluate(() => window.comfyAPI.api.api.interrupt()); // what the Cancel button does
    wait.cancelEnd = (await cancelledRun).end;
    wait.afterCancel = (await banner()) !== null;
    await setInputs({ wait_for_pick: false });
    wait.nextEnd = (await nextRun(queueGraph)).end;
    result.wait = wait;
  }

  if (config.full) {
    result.toleranceErrors = await page.evaluate(() => {
      const errors = [];
      for (const type of ["CachedSearchVerifier", "CachedSearchSampler", "CachedSearchSamplerAdvanced", "CachedSearchRecommit"]) {
        const node = window.LiteGraph.createNode(type);
        window.app.graph.add(node);
        for (const output of [undefined, null, {}, { text: ["old entry"] }, { cachedsearch_ranking: "not a list" },
          { cachedsearch_drafts: [] }, { cachedsearch_delivery: [] }]) {
          try {
            node.onExecuted?.(output);
          } catch (error) {
            errors.push(`${type}: ${error.message}`);
          }
        }
        window.app.graph.remove(node);
      }
      return errors;
    });

    const saved = await page.evaluate(() => window.app.graph.serialize());
    await page.reload();
    await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
    // Newer frontends restore the previous session's workflow asynchronously after the graph exists, and a graph
    // loaded before that restore finishes is replaced by it; no event marks its end. So load the saved graph again
    // if its panels (DOM widgets attached after loadGraphData resolves) have not appeared: a graph whose stored
    // results never show still fails below.
    for (let attempt = 0; attempt < 3; attempt++) {
      await loadWorkflow(saved);
      if (await waitForRows(config.candidates, 10000)) break;
    }
    result.rowsAfterReload = (await candidateRows()).length;

    // The same graph freshly loaded (no stored results) and queued again: ComfyUI reuses every node's cached
    // result and sends no "executed" for them; the panels must still show that result.
    await loadWorkflow(JSON.parse(readFileSync(config.tiny_workflow_fixed, "utf8")));
    await page.evaluate(() => window.app.queuePrompt(0, 1));
    try {
      await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel")]
        .some((panel) => panel.textContent.startsWith("delivered seed")), null, { timeout: 60000 });
    } catch {
      // reported through the counts below
    }
    await waitForRows(config.candidates);
    result.reusedRows = (await candidateRows()).length;
    result.reusedPanels = await panelTexts();

    // Queued twice (batch count 2) with the shipped seed control: two searches over disjoint seed ranges.
    await loadWorkflow(JSON.parse(readFileSync(config.tiny_workflow, "utf8")));
    await page.evaluate((seed) => {
      const sampler = window.app.graph.nodes.find((node) => node.type.startsWith("CachedSearchSampler"));
      sampler.widgets.find((widget) => widget.name === "seed").value = seed;
    }, config.first_seed);
    result.seedRuns = await draftSeedsOfNextRuns(2);
    await waitForIdleQueue();

    // The panels show the newest search; this workflow's earlier one opens from the history on every panel, says
    // what a pick costs there and its pick queues that search's own prompt.
    const shownSeeds = () => page.$$eval(".cachedsearch-panel tr.candidate", (rows) => rows.map((r) => Number(r.dataset.seed)).sort((a, b) => a - b));
    const earlier = { newest: await shownSeeds() };
    await page.click(".cachedsearch-panel button.cachedsearch-earlier", { force: true });
    await page.waitForFunction(() => document.querySelector(".cachedsearch-runs")?.textContent.includes("earlier run"), null, { timeout: 10000 });
    earlier.shown = await shownSeeds();
    earlier.note = (await pickNote()).text;
    earlier.label = await page.$eval(".cachedsearch-runs", (element) => element.textContent);
    earlier.recommitPanel = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit")
      .widgets.find((w) => w.name === "cachedsearch_results").element.textContent);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_earlier_run.png") });
    const again = await nextRun(() => page.click(".cachedsearch-panel tr.candidate.winner button.cachedsearch-pick-commit", { force: true }));
    earlier.queued = again.body;
    earlier.end = again.end;
    earlier.cached = again.cached;
    earlier.outcomes = await pickOutcomes();
    result.earlier = earlier;

    if (config.combined_workflow) {
      // ImageReward + VideoScore + Combine Scores: every verifier's column and the aspects appear in the tables.
      await loadWorkflow(JSON.parse(readFileSync(config.combined_workflow, "utf8")));
      await page.evaluate(() => window.app.queuePrompt(0, 1));
      await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel")]
        .some((panel) => panel.textContent.startsWith("delivered seed")), null, { timeout: 300000 });
      result.tables = await page.$$eval(".cachedsearch-panel table", (tables) => tables.map((table) => ({
        headers: [...table.querySelectorAll("th")].map((th) => th.textContent),
        rows: [...table.querySelectorAll("tr.candidate")].map((row) => ({
          seed: Number(row.dataset.seed), score: Number(row.dataset.score), winner: row.classList.contains("winner"),
          columns: Object.fromEntries([...row.querySelectorAll("td[data-column]")]
            .map((td) => [td.dataset.column, Number(td.textContent)])),
        })),
      })));
    }
  }

  // The missing-node check itself: workflows with node types this server lacks must be flagged.
  for (const path of config.missing_node_probes) {
    result.missingInProbes[path] = await loadWorkflow(JSON.parse(readFileSync(path, "utf8")));
  }
  // what an artist without ComfyUI-Distributed sees on opening the distributed workflow: the frontend's warning
  // and, on frontends with a "View details" panel, the missing packs it names (from the nodes' cnr_id)
  const distributed = config.missing_node_probes.find((path) => path === config.distributed_workflow);
  if (distributed) {
    await page.evaluate((data) => window.app.loadGraphData(data), JSON.parse(readFileSync(distributed, "utf8")));
    await settled(page, "the missing-node warning");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_missing_pack.png") });
    const details = await page.$("button:has-text('View details')");
    if (details) {
      await details.click();
      await settled(page, "the missing-node details");
      await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_missing_pack_details.png") });
      result.missingPackDetails = await page.evaluate(() => document.body.innerText.split("\n").map((line) => line.trim()));
    }
    await page.keyboard.press("Escape");
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
