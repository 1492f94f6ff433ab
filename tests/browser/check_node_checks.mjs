// What the nodes say before a run (#53 items 6 and 7) in headless Debian Chromium against a real ComfyUI server:
// the Pruning Plan says on the node, as it is typed, that it would refuse a schedule whose rounds fall, and the line
// goes once the schedule is fixed; Calibrate's refused cache window, queued as the Run button does, as the server
// answers it; "cost details" opens the Sampler's doc page as a page whose links work (item 8). Prints one JSON object with what it saw. Usage: node check_node_checks.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadWorkflow, openChromium, openWorkflow, recordExtensionErrors, settled, setWidget as setWidgetOf,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], failed: {} };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

const setWidget = (type, name, value) => setWidgetOf(page, type, name, value);

async function showNode(type) {
  await page.evaluate((type) => {
    const node = window.app.graph.nodes.find((n) => n.type === type);
    const canvas = window.app.canvas;
    canvas.ds.scale = 1;
    canvas.ds.offset = [300 - node.pos[0], 200 - node.pos[1]];
    canvas.setDirty(true, true);
  }, type);
  await settled(page, `the view on ${type}`);
}

// Queues the loaded graph as the Run button does; the server's node errors (null when it queued).
const queueRefusal = () => page.evaluate(async () => {
  const api = window.comfyAPI.api.api;
  const { output } = await window.app.graphToPrompt();
  try {
    const body = await api.queuePrompt(0, { output, workflow: {} });
    return body?.node_errors && Object.keys(body.node_errors).length ? body.node_errors : null;
  } catch (error) {
    return error.response?.node_errors ?? { thrown: String(error.message ?? error) };
  }
});

let step = ""; // the step of a section running, named in its failure

async function section(name, checks) {
  try {
    await checks();
  } catch (error) {
    result.failed[name] = `${step}: ${String(error.message ?? error).split("\n")[0].slice(0, 300)}`;
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, `_failed_${name.replace(/\W/g, "_")}.png`) });
  }
}

const checkLine = () => page.$eval(".cachedsearch-schedule-check", (line) => line.textContent).catch(() => null);

try {
  Object.assign(result, await openWorkflow(page, url));

  await section("item 7", async () => {
    const plan = "CachedSearchPruningPlan";
    await loadWorkflow(page, config.pruned_workflow);
    result.lineBefore = await checkLine();
    await setWidget(plan, "schedule", "10:4, 5:2");
    await page.waitForSelector(".cachedsearch-schedule-check", { timeout: 15000 });
    await settled(page, "the refused schedule said");
    result.fallingLine = await checkLine();
    result.fallingTitle = await page.evaluate((type) => window.app.graph.nodes.find((n) => n.type === type).title, plan);
    await showNode(plan);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_plan_refused.png") });
    await setWidget(plan, "schedule", "20%:4, 40%:2");
    await page.waitForFunction(() => !document.querySelector(".cachedsearch-schedule-check"), null, { timeout: 15000 });
    await settled(page, "the fixed schedule");
    result.fixedLine = await checkLine();
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_plan_fixed.png") });
  });

  await section("item 8", async () => {
    // "cost details" opens the Sampler's doc page as a page: it reloads, and its links open the other pages
    step = "the link on the Sampler's panel";
    await loadWorkflow(page, config.stored_workflow);
    await page.waitForFunction(() => document.querySelector(".cachedsearch-doc-link"), null, { timeout: 30000 });
    step = "the page opened";
    const link = page.locator(".cachedsearch-doc-link").first();
    await link.scrollIntoViewIfNeeded();
    const [opened] = await Promise.all([context.waitForEvent("page", { timeout: 30000 }), link.click()]);
    const seenOn = async (tab) => {
      await tab.waitForFunction(() => !document.getElementById("page")?.textContent.startsWith("Loading"), null,
        { timeout: 30000 });
      return { url: tab.url(), heading: await tab.$eval("h1", (h) => h.textContent).catch(() => null),
        paragraphs: await tab.$$eval("p", (ps) => ps.length), text: (await tab.textContent("main")).slice(0, 200) };
    };
    result.docPage = await seenOn(opened);
    await opened.screenshot({ path: config.screenshot.replace(/\.png$/, "_cost_details.png") });
    step = "the page reloaded";
    await opened.reload();
    result.docPageReloaded = await seenOn(opened);
    // a link to a page outside web/ (../../docs/method.md), then one to a node page and its image
    step = "a link to docs/method.md";
    await Promise.all([opened.waitForNavigation(), opened.click("a[href*='docs/method.md']")]);
    result.linkedPage = await seenOn(opened);
    step = "the Verifier's page";
    await opened.goto(new URL("page.html?doc=web/docs/CachedSearchVerifier.md", result.docPage.url).href);
    result.imagePage = await seenOn(opened);
    // read once every image has loaded (up to 2 minutes: a loaded machine serves them late), or as they stand then
    await opened.waitForFunction(() => {
      const images = [...document.querySelectorAll("main img")];
      return images.length > 0 && images.every((image) => image.complete && image.naturalWidth > 0);
    }, null, { timeout: 120000 }).catch(() => {});
    result.images = await opened.$$eval("main img", (images) => images.map((image) => ({
      src: image.getAttribute("src"), loaded: image.complete && image.naturalWidth > 0 })));
    await opened.close();
  });

  await section("item 6", async () => {
    await loadWorkflow(page, config.calibrate_workflow);
    for (const [name, value] of [["steps", 8], ["warmup_steps", 5], ["cooldown_steps", 5]]) {
      await setWidget("CachedSearchCalibrate", name, value);
    }
    const calibrate = await page.evaluate(() => String(window.app.graph.nodes.find((n) => n.type === "CachedSearchCalibrate").id));
    const errors = await queueRefusal();
    result.windowErrors = errors?.[calibrate]?.errors ?? errors;
    await page.evaluate(() => window.app.queuePrompt(0, 1)); // as the Run button: the frontend shows the refusal
    await settled(page, "the refusal shown");
    await showNode("CachedSearchCalibrate");
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_calibrate_refused.png") });
  });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
