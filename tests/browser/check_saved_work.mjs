// The saved drafts in the artist's hands, in headless Debian Chromium against a real ComfyUI server whose folder
// already holds drafts: the cap setting (its default, and a new value the server then keeps), the settings panel
// searched for it, and the Saved drafts dialog from its command, cleared of every draft. Prints one JSON object.
// Usage: node check_saved_work.mjs URL CONFIG.json (CONFIG: {"screenshots": {"settings", "dialog", "cleared"}})
import { readFileSync } from "node:fs";
import { openChromium, recordExtensionErrors, settled } from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const SETTING = "CachedSearch.SavedDrafts.CapGB";
const result = { frontend: null, defaultValue: null, capAfterSetting: null, dialog: null, cleared: null,
  extensionErrors: [] };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);
page.on("dialog", (dialog) => dialog.accept()); // the clear button's confirm()

const cap = () => page.evaluate(async () => (await (await window.comfyAPI.api.api.fetchApi("/cachedsearch/saved_work"))
  .json()).max_bytes);

try {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.app.extensionManager?.setting, null, { timeout: 120000 });
  result.frontend = await page.evaluate(() => window.__COMFYUI_FRONTEND_VERSION__ ?? null);
  result.defaultValue = await page.evaluate((id) => window.app.extensionManager.setting.get(id), SETTING);
  await page.evaluate((id) => window.app.extensionManager.setting.set(id, 2), SETTING);
  await page.waitForFunction(async () => (await (await window.comfyAPI.api.api.fetchApi("/cachedsearch/saved_work"))
    .json()).max_bytes === 2 * 1024 ** 3, null, { timeout: 30000, polling: 200 });
  result.capAfterSetting = await cap();

  await page.evaluate(() => window.app.extensionManager.command.execute("Comfy.ShowSettingsDialog"));
  const search = page.getByPlaceholder(/search settings/i).or(page.locator(".settings-container input[type=text]"))
    .first();
  await search.waitFor({ timeout: 30000 });
  await search.fill("saved drafts");
  // the setting's row, known by the default it states (read above from the setting itself), not by its wording
  await page.getByText(new RegExp(`\\(GB, default ${result.defaultValue}\\)`)).first().waitFor({ timeout: 30000 });
  await settled(page, "the settings panel");
  await page.screenshot({ path: config.screenshots.settings });
  await page.keyboard.press("Escape");

  await page.evaluate(() => window.app.extensionManager.command.execute("CachedSearch.SavedDrafts"));
  const dialog = page.locator("dialog.cachedsearch-saved-drafts");
  await dialog.getByText("Clear all saved drafts").waitFor({ timeout: 30000 });
  result.dialog = await dialog.innerText();
  await settled(page, "the saved drafts dialog");
  await page.screenshot({ path: config.screenshots.dialog });
  await dialog.getByText("Clear all saved drafts").click();
  await dialog.getByText(/^Deleted \d+ drafts?/).waitFor({ timeout: 30000 });
  result.cleared = await dialog.innerText();
  await page.screenshot({ path: config.screenshots.cleared });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
