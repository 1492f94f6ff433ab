// The Sampler's panel after a re-queue that reused drafts an earlier server process saved: loads the workflow in
// headless Debian Chromium against a real ComfyUI server, queues it as the Queue button does, and prints one JSON
// object with the run's outcome and the Sampler panel's summary. Usage: node check_drafts_reused.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import { openChromium, openWorkflow, settled } from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, outcome: null, summaries: [], extensionErrors: [] };

const { context, page } = await openChromium();
page.on("pageerror", (error) => {
  if ((error.stack ?? "").includes("/extensions/cachedsearch/")) result.extensionErrors.push(error.message);
});

try {
  result.frontend = (await openWorkflow(page, url, config.workflow)).frontend;
  result.outcome = await page.evaluate(() => new Promise((resolve) => {
    const api = window.comfyAPI.api.api;
    for (const [event, outcome] of [["execution_success", "success"], ["execution_error", "error"],
      ["execution_interrupted", "interrupted"]]) {
      api.addEventListener(event, () => resolve(outcome), { once: true });
    }
    window.app.queuePrompt(0, 1);
  }));
  await page.waitForFunction(() => document.querySelector(".cachedsearch-summary"), null, { timeout: 60000 });
  await settled(page, "the Sampler's panel");
  result.summaries = await page.$$eval(".cachedsearch-summary", (lines) => lines.map((line) => line.textContent));
  await page.screenshot({ path: config.screenshot });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
