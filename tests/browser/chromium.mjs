// Debian's headless Chromium in a fresh profile, as every browser script here opens it. Returns {context, page}.
// The profile is a temporary folder, removed once context.close() has ended Chromium (every script closes it in
// `finally`).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

export async function openChromium(viewport = { width: 1600, height: 1000 }) {
  const profile = mkdtempSync(join(tmpdir(), "cachedsearch-chromium-"));
  const removeProfile = () => rmSync(profile, { recursive: true, force: true, maxRetries: 5 });
  let context;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: "/usr/bin/chromium",
      headless: true,
      viewport,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"],
    });
  } catch (error) {
    removeProfile();
    throw error;
  }
  const close = context.close.bind(context);
  context.close = async (...options) => {
    try {
      await close(...options);
    } finally {
      removeProfile();
    }
  };
  return { context, page: context.pages()[0] ?? (await context.newPage()) };
}
