// Opens ComfyUI's template browser on this extension's entry (Templates > Extensions > CachedSearch) in headless
// Chromium, saves a screenshot and prints one JSON object: the frontend's version, whether the entry showed our
// name, each card's title and thumbnail as the browser loaded it (in the order shown), and the node types of the graph
// that clicking the first card loads. Usage: node template_browser.mjs URL OUT.png
import { openChromium } from "./chromium.mjs";

const [url, screenshot] = process.argv.slice(2);
const CARDS = '[data-testid^="template-workflow-"]';
const { context, page } = await openChromium({ width: 1600, height: 1500 });  // tall enough to show all the cards at once
// The cards show their pictures through blob: URLs of a media cache, so what was fetched is read off the network.
const fetched = {};
page.on("response", (response) => {
  const match = new URL(response.url()).pathname.match(/\/api\/workflow_templates\/cachedsearch\/(.+)\.jpg$/);
  if (match) fetched[decodeURIComponent(match[1])] = `${response.status()} ${response.headers()["content-type"]}`;
});
try {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.app.extensionManager?.command, null, { timeout: 120000 });
  const frontend = await page.evaluate(() => window.__COMFYUI_FRONTEND_VERSION__ ?? null);
  await page.evaluate(() => window.app.extensionManager.command.execute("Comfy.BrowseTemplates"));
  const dialog = page.locator("[role=dialog]").last();
  // The Extensions group of the navigation folds on some versions: open it when our entry is not shown.
  const entry = dialog.getByText("CachedSearch", { exact: true }).first();
  const extensions = dialog.getByText("Extensions", { exact: true }).first();
  await extensions.waitFor({ timeout: 60000 });
  if (!(await entry.isVisible())) await extensions.click();
  const named = await entry.isVisible();
  await (named ? entry : dialog.getByText("cachedsearch", { exact: true }).first()).click();
  await page.waitForFunction((selector) => document.querySelectorAll(selector).length > 0, CARDS, { timeout: 30000 });
  // A card draws its picture only while it is in view (a skeleton otherwise): each is brought into view and read
  // there. A card may hold more than one image (the picture twice for a hover effect, a logo): its widest is its
  // picture; 0 when none loaded within 15 s.
  const cards = [];
  for (const card of await dialog.locator(CARDS).all()) {
    await card.scrollIntoViewIfNeeded();
    const pictureWidth = () => card.evaluate((element) => Math.max(0, ...[...element.querySelectorAll("img")]
      .map((image) => (image.complete ? image.naturalWidth : 0))));
    let width = await pictureWidth();
    for (let tries = 0; tries < 30 && width === 0; tries += 1) {
      await page.waitForTimeout(500);
      width = await pictureWidth();
    }
    cards.push({ name: (await card.getAttribute("data-testid")).replace("template-workflow-", ""), width,
      text: (await card.innerText()).replace(/\s+/g, " ").trim() });
  }
  await dialog.locator(CARDS).first().scrollIntoViewIfNeeded();
  await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 500)));  // the cards' hover/fade settle
  await page.screenshot({ path: screenshot });
  // What the first card loads: the dialog closes and the canvas holds the template's graph.
  await dialog.locator(CARDS).first().click();
  await page.waitForFunction(() => (window.app.graph?._nodes?.length ?? 0) > 0
    && !document.querySelector('[data-testid^="template-workflow-"]'), null, { timeout: 60000 });
  const loaded = await page.evaluate(() => window.app.graph._nodes.map((node) => node.type));
  console.log(JSON.stringify({ frontend, named, cards, fetched, loaded }));
} catch (error) {
  await page.screenshot({ path: screenshot.replace(/\.png$/, "_failed.png") });  // what the page showed instead
  throw error;
} finally {
  await context.close();
}
