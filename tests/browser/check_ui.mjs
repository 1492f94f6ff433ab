// Loads the example workflows and runs a tiny search in headless Debian Chromium against a real
// ComfyUI server; prints one JSON object with what it saw. Usage: node check_ui.mjs URL CONFIG.json
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, missing: {}, loadWarnings: {}, extensionErrors: [], rows: [], served: [],
  panels: [], overlay: false, toleranceErrors: [], rowsAfterReload: 0, clipped: [], clippedAfterRun: [], storedPanels: [],
  reusedRows: 0, reusedPanels: [], seedRuns: [], missingInProbes: {} };
const consoleMessages = [];

const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "cachedsearch-chromium-")), {
  executablePath: "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1600, height: 1000 },
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run"],
});
const page = context.pages()[0] ?? (await context.newPage());
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

async function openApp() {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
  result.frontend = await page.evaluate(() => window.__COMFYUI_FRONTEND_VERSION__ ?? null);
  result.vueNodes = await page.evaluate(() => window.app.extensionManager?.setting?.get?.("Comfy.VueNodes.Enabled") ?? null);
}

// Panels (a summary or a ranking table) whose content does not fit the height the node gives them (clipped, or
// scrolled for a table) at the node's current width.
const clippedPanels = () => page.$$eval(".cachedsearch-panel", (panels) => panels
  .filter((panel) => panel.offsetParent !== null && panel.scrollHeight > panel.clientHeight + 1)
  .map((panel) => `${panel.textContent.slice(0, 80)} (${panel.scrollHeight} px in ${panel.clientHeight} px)`));

const panelTexts = () => page.$$eval(".cachedsearch-panel", (panels) => panels.map((panel) => panel.textContent));

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
        if (!(node.type in window.LiteGraph.registered_node_types)) missing.add(node.type);
      }
    }
    return [...missing].sort();
  }, workflow);
}

const candidateRows = () => page.$$eval(".cachedsearch-panel tr.candidate", (rows) =>
  rows.map((row) => ({ seed: Number(row.dataset.seed), score: Number(row.dataset.score), winner: row.classList.contains("winner") })));

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
  await openApp();
  for (const path of config.workflows) {
    consoleMessages.length = 0;
    result.missing[path] = await loadWorkflow(JSON.parse(readFileSync(path, "utf8")));
    await page.waitForTimeout(300);
    result.loadWarnings[path] = [...consoleMessages];
  }

  // Results stored in a saved workflow are shown on load, at the default node width, unclipped.
  await loadWorkflow(JSON.parse(readFileSync(config.stored_workflow, "utf8")));
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-summary").length >= 2, null, { timeout: 60000 });
  await page.waitForTimeout(500);
  result.storedPanels = await panelTexts();
  result.clipped.push(...(await clippedPanels()));
  await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_stored.png") });

  if (config.full) {
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
    await page.waitForTimeout(500);
    result.panels = await panelTexts();
    result.clippedAfterRun = await clippedPanels();
    result.rows = await candidateRows();
    result.served = await page.evaluate(() =>
      window.cachedsearchExecuted.map((detail) => detail.output?.cachedsearch_ranking).find(Array.isArray) ?? []);
    await page.screenshot({ path: config.screenshot });
    await page.click(".cachedsearch-panel tr.winner", { force: true });
    result.overlay = (await page.$(".cachedsearch-overlay")) !== null;
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_enlarged.png") });
    if (result.overlay) await page.click(".cachedsearch-overlay");

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
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
