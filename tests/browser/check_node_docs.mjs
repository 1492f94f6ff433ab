// Opens ComfyUI's node docs panel for one node the way an artist does, in headless Debian Chromium against a real
// server: put the node on the canvas, select it and press the selection toolbox's info button (frontend 1.32 shows
// the page in the node library's side panel, 1.4x and later in the right side panel's Info tab). Prints one JSON
// object with what the panel shows; panel null when this frontend has no selection toolbox.
// Usage: node check_node_docs.mjs URL NODE_ID [SCREENSHOT.png]
import { openChromium, openWorkflow, settled } from "./chromium.mjs";

const [url, nodeId, screenshot] = process.argv.slice(2);
const result = { frontend: null, toolbox: null, panel: null, headings: [], text: "" };

const { context, page } = await openChromium();

async function openNodeInfo() {
  // the node on an empty canvas, selected by a click on its title as an artist selects it
  await page.evaluate((id) => {
    window.app.graph.clear();
    const node = window.LiteGraph.createNode(id);
    node.pos = [500, 250];
    window.app.graph.add(node);
    window.app.canvas.setDirty(true, true);
  }, nodeId);
  // where its title is once the canvas has drawn it (the frontend may still move the view as it starts)
  await settled(page, "the node placed on the canvas");
  const title = await page.evaluate(() => {
    const canvas = window.app.canvas;
    const node = window.app.graph.nodes[0];
    const element = canvas.canvas.getBoundingClientRect();
    const [x, y] = [node.pos[0] + node.size[0] / 2, node.pos[1] - 15];
    return [element.left + (x + canvas.ds.offset[0]) * canvas.ds.scale,
      element.top + (y + canvas.ds.offset[1]) * canvas.ds.scale];
  });
  // A frontend still starting up can drop the first click (1.49 does, right after the page loads): click until the
  // node is selected, a few times at most.
  const nodeSelected = () => Object.keys(window.app.canvas.selected_nodes ?? {}).length > 0 ||
    (window.app.canvas.selectedItems?.size ?? 0) > 0;
  for (let attempt = 0; attempt < 3 && !(await page.evaluate(nodeSelected)); attempt += 1) {
    await page.mouse.click(title[0], title[1]);
    await page.waitForFunction(nodeSelected, null, { timeout: 5000 }).catch(() => {});
  }
  const info = page.locator("[data-testid='info-button']").first();
  try {
    await info.waitFor({ state: "visible", timeout: 120000 });
  } catch (error) {
    if (screenshot) await page.screenshot({ path: screenshot });  // what the page showed instead
    throw error;
  }
  await info.click();
}

try {
  result.frontend = (await openWorkflow(page, url)).frontend;
  // A frontend without the selection toolbox has no such button; one that has it must show the page.
  result.toolbox = await page.evaluate(
    () => window.app.extensionManager?.setting?.get?.("Comfy.Canvas.SelectionToolbox") ?? null);
  if (result.toolbox) {
    await openNodeInfo();
    const panel = page.locator(".node-help-content").first();
    await panel.waitFor({ timeout: 120000 });
    await page.waitForFunction(() => document.querySelector(".node-help-content h1, .node-help-content h2"), null,
      { timeout: 120000 });
    result.panel = "node-help-content";
    result.headings = await panel.locator("h1, h2").allTextContents();
    result.text = await panel.textContent();
    if (screenshot) await page.screenshot({ path: screenshot });
  }
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
