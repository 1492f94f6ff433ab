// The LTX-2 search's panels after a live run, in headless Debian Chromium against a real ComfyUI server: loads the
// tiny LTX-2 graph, runs it as the Run button does, waits for the Sampler's, the Verifier's and the Recommit's
// panels, and reads what each shows. Screenshots: the whole graph, and each of the three panels at 100 %.
// Prints one JSON object with what it saw. Usage: node check_ltx2.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import { openChromium, openWorkflow, recordExtensionErrors, settled, showNodeById } from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], panels: {} };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);

// Queues the loaded graph as the Run button does; resolves with the run's end ("success" or the error's detail).
const runGraph = () => page.evaluate(() => new Promise((resolve) => {
  const api = window.comfyAPI.api.api;
  api.addEventListener("execution_success", () => resolve("success"), { once: true });
  api.addEventListener("execution_error", ({ detail }) => resolve(JSON.stringify(detail).slice(0, 2000)),
    { once: true });
  window.app.queuePrompt(0, 1);
}));

// What the panel of node `id` shows: its text, its lines by class, its table rows and the frames its players hold.
const panelOf = (id) => page.evaluate((id) => {
  const panel = window.app.graph.getNodeById(Number(id)).widgets
    .find((w) => w.name === "cachedsearch_results")?.element;
  if (!panel) return null;
  const texts = (selector) => [...panel.querySelectorAll(selector)].map((element) => element.textContent);
  return {
    text: panel.textContent,
    verifier: texts(".cachedsearch-verifier"),
    summary: texts(".cachedsearch-summary"),
    players: panel.querySelectorAll("img.cachedsearch-player").length,
    rows: [...panel.querySelectorAll("tr.candidate")].map((row) => ({
      seed: Number(row.dataset.seed),
      winner: row.classList.contains("winner"),
      players: row.querySelectorAll("img.cachedsearch-player").length,
    })),
  };
}, id);

async function showGraph() {
  await page.evaluate(() => {
    const canvas = window.app.canvas;
    const nodes = window.app.graph.nodes;
    const left = Math.min(...nodes.map((n) => n.pos[0])) - 40;
    const top = Math.min(...nodes.map((n) => n.pos[1])) - 100;
    const right = Math.max(...nodes.map((n) => n.pos[0] + n.size[0])) + 40;
    const bottom = Math.max(...nodes.map((n) => n.pos[1] + n.size[1])) + 40;
    const rect = canvas.canvas.getBoundingClientRect();
    const scale = Math.min((rect.width - 120) / (right - left), (rect.height - 180) / (bottom - top), 1);
    canvas.ds.scale = scale;
    canvas.ds.offset = [80 / scale - left, 120 / scale - top];
    canvas.setDirty(true, true);
  });
  await settled(page, "the whole graph in view");
}

try {
  Object.assign(result, await openWorkflow(page, url, config.workflow));
  result.outcome = await runGraph();
  if (result.outcome === "success") {
    await page.waitForFunction((n) => document.querySelectorAll(".cachedsearch-panel tr.candidate").length >= n,
      config.candidates, { timeout: 60000 });
    await settled(page, "the panels after the run");
    await showGraph();
    await page.screenshot({ path: config.screenshot });
    for (const [name, id] of Object.entries(config.nodes)) {
      result.panels[name] = await panelOf(id);
      await showNodeById(page, id);
      await page.screenshot({ path: config.screenshot.replace(/\.png$/, `_${name}.png`) });
    }
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
