// Debian's headless Chromium in a fresh profile, as every browser script here opens it. Returns {context, page}.
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export async function openChromium(viewport = { width: 1600, height: 1000 }) {
  const context = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "cachedsearch-chromium-")), {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run"],
  });
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}
