// Resume after a cancel (#53 item 3) in headless Debian Chromium against a real ComfyUI server: a search whose seed
// control is randomize is queued as the Run button does and cancelled during a draft (the server presses Cancel at
// a transformer call the test set: its CachedSearchTestPressCancel node); the Sampler then offers to resume it, and
// one click queues it again with that run's seed. Counts the drafts each run computed from the progress bar (a
// computed draft moves it over its steps, a reused one moves nothing). Prints one JSON object with what it saw.
// Usage: node check_resume.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import { openChromium, openWorkflow, recordExtensionErrors, settled, showNodeById } from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [] };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

// Queues the graph as the Run button does (or `click`s the given selector) and resolves with {outcome, promptId,
// drafts: the drafts the sampler computed (began)}.
const run = (sampler, steps, click) => page.evaluate(({ sampler, steps, click }) =>
  new Promise((resolve) => {
    const api = window.comfyAPI.api.api;
    const drafts = new Set();
    let promptId;
    const started = ({ detail }) => { promptId ??= detail?.prompt_id; };
    const progress = ({ detail }) => {
      if (String(detail?.node) !== sampler || !(detail.value > 0)) return;
      drafts.add(Math.floor((detail.value - 1) / steps));
    };
    const events = { execution_success: "success", execution_interrupted: "interrupted", execution_error: "error" };
    const ended = (event) => {
      if (event.detail?.prompt_id !== promptId) return;
      for (const name of Object.keys(events)) api.removeEventListener(name, ended);
      api.removeEventListener("progress", progress);
      api.removeEventListener("execution_start", started);
      resolve({ outcome: events[event.type], promptId, drafts: drafts.size });
    };
    for (const name of Object.keys(events)) api.addEventListener(name, ended);
    api.addEventListener("progress", progress);
    api.addEventListener("execution_start", started);
    if (click) document.querySelector(click).click();
    else window.app.queuePrompt(0, 1);
  }), { sampler, steps, click });

const seedState = (sampler) => page.evaluate((sampler) => {
  const node = window.app.graph.getNodeById(Number(sampler));
  const value = (name) => node.widgets.find((w) => w.name === name)?.value;
  return { seed: value("seed"), control: value("control_after_generate") };
}, sampler);

// Whether the "‹ earlier" button on the panel of node `id` is disabled (given up to 2 minutes for the history lookup
// that decides it: 10 s were too few on a loaded machine); null: no button.
async function earlierDisabled(id) {
  const button = (id) => window.app.graph.getNodeById(Number(id)).widgets
    .find((w) => w.name === "cachedsearch_results")?.element.querySelector("button.cachedsearch-earlier") ?? null;
  const disabled = `(${button})(${JSON.stringify(id)})`;
  await page.waitForFunction(`${disabled}?.disabled`, null, { timeout: 120000 }).catch(() => {});
  return page.evaluate(`${disabled}?.disabled ?? null`);
}

try {
  Object.assign(result, await openWorkflow(page, url, config.workflow));
  const sampler = config.sampler;
  // the server presses Cancel inside a draft (the test's CachedSearchTestPressCancel node)
  result.cancelled = await run(sampler, config.steps, null);
  result.afterCancel = await seedState(sampler);
  result.offered = await page.waitForSelector(".cachedsearch-resume button", { timeout: 60000 })
    .then(() => page.$eval(".cachedsearch-resume", (line) => ({ seed: Number(line.dataset.seed), text: line.textContent })))
    .catch(() => null);
  if (result.offered) {
    await showNodeById(page, sampler);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_offer.png") });
    result.resumed = await run(sampler, config.steps, ".cachedsearch-resume button");
    result.afterResume = await seedState(sampler);
    await page.waitForFunction(() => !document.querySelector(".cachedsearch-resume button"), null, { timeout: 30000 });
    await page.waitForFunction(() => document.querySelector(".cachedsearch-summary"), null, { timeout: 60000 });
    await settled(page, "the panels after the resume");
    result.summaries = await page.$$eval(".cachedsearch-summary", (lines) => lines.map((line) => line.textContent));
    result.pickNote = await page.$eval(".cachedsearch-pick-note", (line) => line.textContent).catch(() => null);
    result.earlierDisabledAfterResume = await earlierDisabled(config.verifier);
    await showNodeById(page, sampler);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, "_resumed.png") });
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
