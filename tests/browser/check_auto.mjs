// Budget "auto" on the canvas, in headless Debian Chromium against a real ComfyUI server: loads the calibration
// workflow and queues it as the Run button does, then loads the wide search and queues it the same way, and reads
// what the Sampler's and the Recommit's panels show. Screenshots: the whole wide graph, and each panel at 100 %.
// Prints one JSON object with what it saw. Usage: node check_auto.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadWorkflow, nextRun, openChromium, openWorkflow, recordExtensionErrors, showNodeById,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], runs: {}, panels: {} };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

const queue = () => page.evaluate(() => window.app.queuePrompt(0, 1));

// The text of node `id`'s result panel, and of its summary lines.
const panelOf = (id) => page.evaluate((id) => {
  const panel = window.app.graph.getNodeById(Number(id)).widgets
    .find((w) => w.name === "cachedsearch_results")?.element;
  if (!panel) return null;
  const box = panel.getBoundingClientRect();
  return { text: panel.textContent, summary: [...panel.querySelectorAll(".cachedsearch-summary")]
    .map((element) => element.textContent), width: box.width, height: box.height };
}, id);

try {
  Object.assign(result, await openWorkflow(page, url, config.calibrate));
  result.runs.calibrate = (await nextRun(page, queue, 600000)).end;
  await loadWorkflow(page, config.wide);
  result.runs.wide = (await nextRun(page, queue, 600000)).end;
  await page.screenshot({ path: config.screenshot });
  for (const [name, id] of Object.entries(config.nodes)) {
    result.panels[name] = await panelOf(id);
    await showNodeById(page, id);
    await page.screenshot({ path: config.screenshot.replace(/\.png$/, `_${name}.png`) });
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
