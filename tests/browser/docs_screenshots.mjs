// The docs' GUI pictures (scripts/screenshots.py runs this): loads a workflow into the frontend of a real ComfyUI
// server in headless Debian Chromium, queues it, waits until Recommit shows the delivered seed, and saves the whole
// graph and a close-up of one node once the run has finished. Usage: node docs_screenshots.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import { openChromium, settled } from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const [width, height] = config.viewport;

const { context, page } = await openChromium({ width, height });

// Shows the canvas rectangle [x, y, w, h] (graph units) centred in the part of the canvas that the side bar and the
// top bar leave visible, as large as fits.
async function showArea(area, margin) {
  return page.evaluate(([area, margin]) => {
    const canvas = window.app.canvas;
    const element = canvas.canvas.getBoundingClientRect();
    const sideBar = document.querySelector(".side-tool-bar-container")?.getBoundingClientRect();
    const topBar = document.querySelector(".comfyui-body-top, .workflow-tabs-container")?.getBoundingClientRect();
    const left = Math.max(0, (sideBar?.right ?? element.left) - element.left);
    const top = Math.max(0, (topBar?.bottom ?? element.top) - element.top);
    const visible = [element.width - left, element.height - top];
    const scale = Math.min((visible[0] - 2 * margin) / area[2], (visible[1] - 2 * margin) / area[3]);
    canvas.ds.scale = scale;
    canvas.ds.offset = [(left + (visible[0] - area[2] * scale) / 2) / scale - area[0],
      (top + (visible[1] - area[3] * scale) / 2) / scale - area[1]];
    canvas.setDirty(true, true);
    return { left: element.left, top: element.top, scale };
  }, [area, margin]);
}

try {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
  const workflow = JSON.parse(readFileSync(config.workflow, "utf8"));
  await page.evaluate((workflow) => window.app.loadGraphData(workflow), workflow);
  await page.evaluate(() => {
    window.cachedsearchRunEnded = null;
    for (const event of ["execution_success", "execution_error", "execution_interrupted"]) {
      window.comfyAPI.api.api.addEventListener(event, () => { window.cachedsearchRunEnded = event; });
    }
    return window.app.queuePrompt(0, 1);
  });
  await page.waitForFunction(() => window.cachedsearchRunEnded !== null, null, { timeout: 600000 });
  const ended = await page.evaluate(() => window.cachedsearchRunEnded);
  if (ended !== "execution_success") throw new Error(`the run ended with ${ended}`);
  await page.waitForFunction(() => [...document.querySelectorAll(".cachedsearch-panel")]
    .some((panel) => panel.textContent.startsWith("delivered seed")), null, { timeout: 60000 });
  await settled(page, "the panels after the run");

  // The whole graph: every group (the nodes grow with their results, so the bounds are read after the run).
  const bounds = await page.evaluate(() => {
    const graph = window.app.graph;
    const boxes = [...graph.nodes.map((node) => [node.pos[0], node.pos[1] - 30, node.size[0], node.size[1] + 30]),
      ...(graph.groups ?? graph._groups ?? []).map((group) => group._bounding ?? group.bounding)];
    const left = Math.min(...boxes.map((b) => b[0])), top = Math.min(...boxes.map((b) => b[1]));
    const right = Math.max(...boxes.map((b) => b[0] + b[2])), bottom = Math.max(...boxes.map((b) => b[1] + b[3]));
    return [left, top, right - left, bottom - top];
  });
  await showArea(bounds, 20);
  await settled(page, "the whole graph in view");
  await page.screenshot({ path: config.graph_png });

  // One node close up, cut out of the page around its title bar and body.
  const node = await page.evaluate((type) => {
    const found = window.app.graph.nodes.find((n) => n.type === type);
    return [found.pos[0], found.pos[1] - 30, found.size[0], found.size[1] + 30];
  }, config.close_up_type);
  const placed = await showArea(node, 40);
  await settled(page, "the close-up in view");
  const pad = 12;
  await page.screenshot({
    path: config.close_up_png,
    clip: await page.evaluate(([node, placed, pad]) => {
      const ds = window.app.canvas.ds;
      return { x: placed.left + (node[0] + ds.offset[0]) * ds.scale - pad,
        y: placed.top + (node[1] + ds.offset[1]) * ds.scale - pad,
        width: node[2] * ds.scale + 2 * pad, height: node[3] * ds.scale + 2 * pad };
    }, [node, placed, pad]),
  });
} finally {
  await context.close();
}
console.log(JSON.stringify({ graph: config.graph_png, close_up: config.close_up_png }));
