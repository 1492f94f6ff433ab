// CachedSearch Calibrate in headless Debian Chromium against a real ComfyUI server: stored results show on load,
// before a run the node states its cost and follows its widgets, a live calibration fills the node's table and
// Apply Cache's line, Cancel (pressed by the server in a set rollout: the test's CachedSearchTestPressCancel node)
// stops a calibration and the next one completes. Prints one JSON object with what it saw.
// Usage: node check_calibrate.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadWorkflow, openChromium, openWorkflow, pressCancelAt, progressTexts as progressTextsOf, recordExtensionErrors,
  settled, setWidget,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], stored: [], live: [], applyCache: [], clipped: [],
  cancelled: null, afterCancel: [], requeued: [], costBefore: null, costMoreSeeds: null, costRefused: null };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

const tableRows = () => page.$$eval(".cachedsearch-calibration tr.tau", (rows) => rows.map((row) => ({
  tau: Number(row.dataset.tau), capture: row.dataset.capture === "" ? null : Number(row.dataset.capture),
  recommended: row.classList.contains("recommended"), cells: [...row.querySelectorAll("td")].map((td) => td.textContent),
})));
const panelTexts = () => page.$$eval(".cachedsearch-calibration", (panels) => panels.map((panel) => panel.textContent));
const clipped = () => page.$$eval(".cachedsearch-calibration", (panels) => panels
  .filter((panel) => panel.offsetParent !== null && panel.scrollHeight > panel.clientHeight + 1)
  .map((panel) => `${panel.textContent.slice(0, 60)} (${panel.scrollHeight} px in ${panel.clientHeight} px)`));

const progressTexts = () => progressTextsOf(page);

const costText = () => page.$eval(".cachedsearch-calibration .cost", (line) => line.textContent).catch(() => null);

// Sets the calibrator's widget `name` to `value` as typing it would, and waits for the cost line to change.
async function costAfterSetting(name, value, before) {
  await setWidget(page, config.calibrate_type ?? "CachedSearchCalibrate", name, value);
  await page.waitForFunction((before) => document.querySelector(".cachedsearch-calibration .cost")?.textContent !== before,
    before, { timeout: 15000 });
  return costText();
}

// Queues the loaded graph with the calibrator's (config.calibrate_type, CachedSearchCalibrate by default) first seed
// set to `seed`; resolves with the prompt's outcome.
async function queueCalibration(seed) {
  return page.evaluate(async ({ seed, calibrateType }) => {
    const api = window.comfyAPI.api.api;
    const node = window.app.graph.nodes.find((n) => n.type === calibrateType);
    node.widgets.find((w) => w.name === "first_seed").value = seed;
    return new Promise((resolve) => {
      api.addEventListener("execution_interrupted", () => resolve("interrupted"), { once: true });
      api.addEventListener("execution_success", () => resolve("success"), { once: true });
      api.addEventListener("execution_error", () => resolve("error"), { once: true });
      window.app.queuePrompt(0, 1);
    });
  }, { seed, calibrateType: config.calibrate_type ?? "CachedSearchCalibrate" });
}



try {
  Object.assign(result, await openWorkflow(page, url));

  // A saved workflow carrying a calibration shows its table and Apply Cache's line on load.
  await loadWorkflow(page, config.stored_workflow);
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-calibration tr.tau").length >= 1, null,
    { timeout: 60000 });
  await settled(page, "the stored calibration");
  result.stored = await tableRows();
  result.storedPanels = await panelTexts();
  result.clipped.push(...(await clipped()));
  await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_stored.png") });

  // Before a run: the cost, asked of the server from the widgets, follows them; a value the node would refuse is
  // named.
  await loadWorkflow(page, config.live_workflow);
  await page.waitForFunction(() => document.querySelector(".cachedsearch-calibration .cost")?.textContent.startsWith("Cost:"),
    null, { timeout: 30000 });
  await settled(page, "the cost before the run");
  result.costBefore = await costText();
  result.clipped.push(...(await clipped()));
  await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_before.png") });
  const seeds = await page.evaluate((calibrateType) => window.app.graph.nodes.find((n) => n.type === calibrateType)
    .widgets.find((w) => w.name === "seeds").value, config.calibrate_type ?? "CachedSearchCalibrate");
  result.costMoreSeeds = await costAfterSetting("seeds", seeds + 1, result.costBefore);
  const tausWidget = (config.calibrate_type ?? "CachedSearchCalibrate") === "CachedSearchCalibrate" ? "taus" : "taus_high";
  const taus = await page.evaluate(({ calibrateType, name }) => window.app.graph.nodes.find((n) => n.type === calibrateType)
    .widgets.find((w) => w.name === name).value, { calibrateType: config.calibrate_type ?? "CachedSearchCalibrate", name: tausWidget });
  result.costRefused = await costAfterSetting(tausWidget, "0.5 0.1", result.costMoreSeeds);
  await costAfterSetting(tausWidget, taus, result.costRefused);
  if (await costAfterSetting("seeds", seeds, result.costMoreSeeds) !== result.costBefore) {
    throw new Error("the cost did not come back with the widgets");
  }

  // A live calibration: the table fills, Apply Cache (wired from its tau) shows the remembered setup.
  result.liveOutcome = await queueCalibration(config.seed);
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-calibration tr.tau").length >= 1, null,
    { timeout: 60000 });
  await settled(page, "the live calibration's table");
  result.live = await tableRows();
  result.livePanels = await panelTexts();
  // the frontend's progress texts ("rollout 9 / 9 ...") left on CachedSearch nodes after the run
  result.progressTextsAfterRun = await progressTexts();
  result.clipped.push(...(await clipped()));
  await page.screenshot({ path: config.screenshot });

  // The same graph queued again from a fresh load: ComfyUI reuses every cached result and sends our nodes no
  // "executed", yet the calibration's table shows again.
  await loadWorkflow(page, config.live_workflow);
  result.requeuedOutcome = await queueCalibration(config.seed);
  await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-calibration tr.tau").length >= 1, null,
    { timeout: 30000 }).catch(() => {});
  await settled(page, "the re-queued calibration");
  result.requeued = await tableRows();
  result.requeuedPanels = await panelTexts();

  if (config.cancel) {
    // Cancel a calibration a third in, then run the same one to the end.
    await loadWorkflow(page, config.live_workflow);
    await pressCancelAt(page, config.press_cancel_at);
    result.cancelled = await queueCalibration(config.seed + 100);
    await settled(page, "the cancelled calibration");
    result.progressTextsAfterCancel = await progressTexts();
    result.afterCancelOutcome = await queueCalibration(config.seed + 100);
    await settled(page, "the calibration after a cancel");
    result.afterCancel = await tableRows();
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_after_cancel.png") });
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
