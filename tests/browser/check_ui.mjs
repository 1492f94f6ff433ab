// Loads the example workflows and runs a tiny search in headless Debian Chromium against a real
// ComfyUI server; prints one JSON object with what it saw. Usage: node check_ui.mjs URL CONFIG.json
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { missing: {}, extensionErrors: [], rows: [], served: [], panels: [], overlay: false, toleranceErrors: [],
  rowsAfterReload: 0 };

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
});
page.on("pageerror", (error) => {
  if (fromExtension(error.stack ?? "")) result.extensionErrors.push(error.message);
});

async function openApp() {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
}

async function loadWorkflow(workflow) {
  return page.evaluate(async (data) => {
    const missing = [];
    const original = window.app.showMissingNodesError;
    window.app.showMissingNodesError = (types) => missing.push(...types.map((t) => (typeof t === "string" ? t : t.type)));
    try {
      await window.app.loadGraphData(data);
    } finally {
      window.app.showMissingNodesError = original;
    }
    return missing;
  }, workflow);
}

const candidateRows = () => page.$$eval(".cachedsearch-panel tr.candidate", (rows) =>
  rows.map((row) => ({ seed: Number(row.dataset.seed), score: Number(row.dataset.score), winner: row.classList.contains("winner") })));

try {
  await openApp();
  for (const path of config.workflows) {
    result.missing[path] = await loadWorkflow(JSON.parse(readFileSync(path, "utf8")));
  }
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
  result.panels = await page.$$eval(".cachedsearch-panel", (panels) => panels.map((panel) => panel.textContent));
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
  await loadWorkflow(saved);
  result.rowsAfterReload = (await candidateRows()).length;

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
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
