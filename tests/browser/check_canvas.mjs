// The canvas's third pass (#41) in headless Debian Chromium against a real ComfyUI server, on stored and tiny
// workflows (no search runs): the Pruning Plan's title follows a schedule and a schedule whose rounds fall is
// refused when queued; Calibrate's cost line refuses a cache window that leaves nothing to skip and a stored
// calibration where no tau skipped says why; the Sampler's "cost details" opens its help page as a page; the
// Recommit's wait_for_pick is not hidden among advanced inputs. Prints one
// JSON object with what it saw. Usage: node check_canvas.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadWorkflow, openChromium, openWorkflow, progressTexts as progressTextsOf, recordExtensionErrors, settled,
  setWidget as setWidgetOf,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], failed: {} };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

const setWidget = (type, name, value) => setWidgetOf(page, type, name, value);

// The title the node carries and, in Nodes 2.0, the one its DOM node shows.
const titleOf = (type) => page.evaluate((type) => {
  const node = window.app.graph.nodes.find((n) => n.type === type);
  const element = document.querySelector(`[data-node-id="${node.id}"]`);
  const shown = element?.querySelector("[data-testid='node-title'], .node-title, .lg-node-header")?.textContent?.trim() ?? null;
  return { title: node.title, shown };
}, type);

// Scrolls the canvas so the first node of `type` is at the top left (its bottom, `bottom`: where its panel is), for
// a screenshot at 100 %.
async function showNode(type, bottom = false) {
  await page.evaluate(({ type, bottom }) => {
    const node = window.app.graph.nodes.find((n) => n.type === type);
    const canvas = window.app.canvas;
    canvas.ds.scale = 1;
    canvas.ds.offset = [80 - node.pos[0], (bottom ? 900 - node.size[1] : 200) - node.pos[1]];
    canvas.setDirty(true, true);
  }, { type, bottom });
  await settled(page, `the view on ${type}`);
}

// Queues the loaded graph as the Run button does; the server's refusal (its node errors) or null when it queued.
const queueRefusal = () => page.evaluate(async () => {
  const api = window.comfyAPI.api.api;
  const { output } = await window.app.graphToPrompt();
  try {
    const body = await api.queuePrompt(0, { output, workflow: {} });
    return body?.node_errors && Object.keys(body.node_errors).length ? JSON.stringify(body.node_errors) : null;
  } catch (error) {
    return JSON.stringify(error.response ?? error.message ?? String(error));
  }
});

// Queues the loaded graph (as the Run button does) and resolves with how the run ended; `during(detail)` runs on
// each event of the run before it ends (e.g. to cancel it once it waits).
const runGraph = () => page.evaluate(() => new Promise((resolve) => {
  const api = window.comfyAPI.api.api;
  const events = ["execution_success", "execution_interrupted", "execution_error"];
  const ended = (event) => {
    for (const name of events) api.removeEventListener(name, ended);
    resolve(event.type);
  };
  for (const name of events) api.addEventListener(name, ended);
  window.app.queuePrompt(0, 1);
}));

const progressTexts = () => progressTextsOf(page);

const recommitPanel = () => page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit")
  .widgets.find((w) => w.name === "cachedsearch_results")?.element.textContent ?? null);

async function setRecommit(values) {
  for (const [name, value] of Object.entries(values)) await setWidget("CachedSearchRecommit", name, value);
}

// Runs one item's checks; one that throws (a step that never came) is recorded in result.failed and the next item
// still runs, so a run against code without the fixes shows every item's outcome.
async function section(name, checks) {
  try {
    await checks();
  } catch (error) {
    result.failed[name] = String(error.message ?? error).split("\n")[0].slice(0, 300);
    await Promise.all(context.pages().slice(1).map((opened) => opened.close())); // a tab the item opened
  }
}

const costText = () => page.$eval(".cachedsearch-calibration .cost", (line) => line.textContent).catch(() => null);

try {
  Object.assign(result, await openWorkflow(page, url));

  await section("item 5", async () => {
    // Item 5: the Pruning Plan's title follows its widgets; a schedule whose rounds fall is refused when queued.
    await loadWorkflow(page, config.pruned_workflow);
    const plan = "CachedSearchPruningPlan";
    result.planTitle = await titleOf(plan);
    await setWidget(plan, "schedule", "70%:4, 40%:2");
    await settled(page, "the schedule typed");
    result.planTitleWithSchedule = await titleOf(plan);
    await showNode(plan);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_plan.png") });
    result.fallingRefusal = await queueRefusal();
    await setWidget(plan, "schedule", "");
    result.planTitleWithoutSchedule = await titleOf(plan);
  });

  await section("items 2 and 3", async () => {
    // Item 2: the cost line refuses a window that leaves nothing to skip, before the run.
    await loadWorkflow(page, config.calibrate_workflow);
    await page.waitForFunction(() => document.querySelector(".cachedsearch-calibration .cost")?.textContent.startsWith("Cost:"),
      null, { timeout: 30000 });
    result.costBefore = await costText();
    for (const [name, value] of [["steps", 8], ["warmup_steps", 5], ["cooldown_steps", 5]]) {
      await setWidget("CachedSearchCalibrate", name, value);
    }
    await page.waitForFunction((before) => document.querySelector(".cachedsearch-calibration .cost")?.textContent !== before,
      result.costBefore, { timeout: 15000 }).catch(() => {});
    await settled(page, "the cost after the window changed");
    result.costWindow = await costText();
    await showNode("CachedSearchCalibrate", true);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_calibrate_window.png") });
    // a stored calibration in which no tau skipped a call
    await loadWorkflow(page, config.calibrate_nothing_skipped);
    await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-calibration tr.tau").length >= 1, null,
      { timeout: 30000 });
    // Item 3: at the width the shipped calibration workflows give the node, the table with intervals fits, not
    // scrolled
    await page.evaluate((width) => {
      const node = window.app.graph.nodes.find((n) => n.type === "CachedSearchCalibrate");
      node.setSize([width, node.size[1]]);
      window.app.canvas.setDirty(true, true);
    }, config.calibrate_width);
    await settled(page, "the calibrator at its default width");
    result.tableFit = await page.$eval(".cachedsearch-calibration:has(tr.tau)", (panel) => ({
      width: panel.clientWidth, tableWidth: panel.querySelector("table").scrollWidth, scrollWidth: panel.scrollWidth,
      headers: [...panel.querySelectorAll("th")].map((th) => {
        const box = th.getBoundingClientRect();
        const outer = panel.getBoundingClientRect();
        return { title: th.textContent, inside: box.left >= outer.left - 1 && box.right <= outer.right + 1 };
      }),
      clipped: panel.scrollHeight > panel.clientHeight + 1 }));
    result.nothingSkippedVerdict = await page.$eval(".cachedsearch-calibration:has(tr.tau) .verdict", (line) => line.textContent);
    result.nothingSkippedRecommended = await page.$$eval(".cachedsearch-calibration tr.recommended", (rows) => rows.length);
    await showNode("CachedSearchCalibrate", true);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_calibrate_nothing_skipped.png") });
  });

  await section("item 4", async () => {
    // Item 4: "cost details" on the Sampler's panel opens its help page as a page the browser shows.
    await loadWorkflow(page, config.stored_workflow);
    await page.waitForFunction(() => document.querySelector(".cachedsearch-doc-link"), null, { timeout: 30000 });
    result.samplerPanel = await page.$eval(".cachedsearch-panel:has(.cachedsearch-doc-link)", (panel) => panel.textContent);
    result.samplerTitle = await page.$eval(".cachedsearch-panel .cachedsearch-summary", (summary) => summary.title);
    // the product's own wording of a transformer call, from the module the server lists for the frontend
    result.callsTitle = await page.evaluate(async () => {
      const scripts = await (await window.comfyAPI.api.api.fetchApi("/extensions")).json();
      const rows = scripts.find((path) => path.endsWith("/cachedsearch_rows.js"));
      return (await import(new URL(rows, window.location.href).href)).CALLS_TITLE;
    });
    await showNode("CachedSearchSampler");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_sampler_easycache.png") });
    const link = page.locator(".cachedsearch-doc-link").first();
    await link.scrollIntoViewIfNeeded();
    const [opened] = await Promise.all([context.waitForEvent("page", { timeout: 30000 }), link.click()]);
    result.docPage = await opened.waitForSelector("h1", { timeout: 30000 })
      .then(async () => ({ heading: await opened.$eval("h1", (h) => h.textContent),
        paragraphs: await opened.$$eval("p", (ps) => ps.length), text: (await opened.textContent("body")).slice(0, 400) }))
      .catch((error) => ({ error: String(error.message ?? error).slice(0, 300), url: opened.url() }));
    await opened.screenshot({ path: config.screenshot.replace(/\.png$/, "_cost_details.png") }).catch(() => {});
  });

  await section("item 7", async () => {
    // Item 7: the Recommit's wait_for_pick shows among its widgets without "Show advanced inputs" (Nodes 2.0 draws
    // widgets as DOM elements and hides advanced ones; classic draws every widget on the canvas).
    await loadWorkflow(page, config.stored_workflow);
    await showNode("CachedSearchRecommit");
    result.recommitWidgetsShown = await page.evaluate(() => {
      const node = window.app.graph.nodes.find((n) => n.type === "CachedSearchRecommit");
      const element = document.querySelector(`[data-node-id="${node.id}"]`);
      return element ? element.textContent : null;
    });
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_recommit_widgets.png") });
  });

  await section("item 1", async () => {
    // Item 1: Cancel leaves nothing stale. A search delivers; the same search queued in wait mode waits and is
    // cancelled: the Recommit says it delivered nothing in that run (not the earlier delivery beside that run's
    // drafts) and no progress text stays; a later run delivers, and browsing back onto the cancelled run the
    // Recommit says the same.
    if (config.tiny_workflow_fixed) {
      await loadWorkflow(page, config.tiny_workflow_fixed);
      result.firstRun = await runGraph();
      await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel")]
        .some((panel) => panel.textContent.startsWith("delivered seed")), null, { timeout: 120000 });
      result.firstDelivery = await recommitPanel();
      // a new search (another seed), so the cancelled run has drafts and a ranking of its own in the history
      const seed = await page.evaluate(() => window.app.graph.nodes.find((n) => n.type === "CachedSearchSampler")
        .widgets.find((w) => w.name === "seed").value);
      await setWidget("CachedSearchSampler", "seed", seed + 10);
      await setRecommit({ wait_for_pick: true, pick: 0 });
      const cancelled = runGraph();
      await page.waitForSelector(".cachedsearch-wait", { timeout: 120000 });
      result.progressWhileWaiting = await progressTexts();
      await page.evaluate(() => window.comfyAPI.api.api.interrupt()); // what the Cancel button does
      result.cancelledRun = await cancelled;
      await page.waitForFunction(() => !document.querySelector(".cachedsearch-wait"), null, { timeout: 30000 });
      await settled(page, "the panels after the cancel");
      result.recommitAfterCancel = await recommitPanel();
      result.progressAfterCancel = await progressTexts();
      await showNode("CachedSearchRecommit");
      await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_cancelled_wait.png") });
      await setRecommit({ wait_for_pick: false });
      await setWidget("CachedSearchSampler", "seed", seed + 20);
      result.nextRun = await runGraph();
      await settled(page, "the run after the cancel");
      result.recommitAfterNext = await recommitPanel();
      // back through the history from the Verifier's panel onto the cancelled run
      // where the cancelled run stands among the Verifier's runs in the history, newest first
      result.cancelledIndex = await page.evaluate(async () => {
        const verifier = String(window.app.graph.nodes.find((n) => n.type === "CachedSearchVerifier").id);
        const history = await (await window.comfyAPI.api.api.fetchApi("/history?max_items=64")).json();
        return Object.values(history).reverse().filter((run) => run.outputs?.[verifier])
          .findIndex((run) => run.status?.status_str === "error");
      });
      await showNode("CachedSearchVerifier");
      for (let step = 0; step < result.cancelledIndex; step += 1) {
        await page.evaluate(() => document.querySelector(".cachedsearch-panel button.cachedsearch-earlier").click());
        await page.waitForFunction((step) => document.querySelector(".cachedsearch-runs span")?.textContent
          .startsWith(`earlier run ${step}`), step + 1, { timeout: 30000 });
      }
      await settled(page, "an earlier run shown");
      result.browsedLabel = await page.$eval(".cachedsearch-runs span", (span) => span.textContent).catch(() => null);
      result.recommitBrowsed = await recommitPanel();
      if (result.cancelledIndex > 0) {
        await showNode("CachedSearchRecommit");
        await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_browsed_cancelled.png") });
      }
    }
  });

} finally {
  await context.close();
}
console.log(JSON.stringify(result));
