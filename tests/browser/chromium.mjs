// Debian's headless Chromium in a fresh profile, as every browser script here opens it. Returns {context, page}.
// The profile is a temporary folder, removed once context.close() has ended Chromium (every script closes it in
// `finally`).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
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

// Records the errors our scripts raise in the page (their URL in the console message's location or the error's
// stack), not the frontend's own network noise, onto `errors`; and each deprecated frontend API they use
// (recordDeprecatedUse).
export function recordExtensionErrors(page, errors) {
  const fromExtension = (where) => where.includes("/extensions/cachedsearch/");
  page.on("console", (message) => {
    if (message.type() === "error" && fromExtension(message.location()?.url ?? "")) errors.push(message.text());
  });
  page.on("pageerror", (error) => {
    if (fromExtension(error.stack ?? "")) errors.push(error.message);
  });
  recordDeprecatedUse(page, errors);
}

const DEPRECATED_USE = "CachedSearch used a deprecated frontend API: ";

// Records onto `errors` each use our scripts make of a frontend API that the frontend's litegraph says is
// deprecated (its warning's call stack passes through our scripts): the newest frontend warns on them (input.link,
// output.links, ...) and a later one drops them. Litegraph warns once per message and page, so a use after the
// frontend's own would pass unseen: it is asked to call its handlers every time, and the console keeps its one
// warning per message.
export function recordDeprecatedUse(page, errors) {
  page.on("console", (message) => {
    if (message.text().startsWith(DEPRECATED_USE)) errors.push(message.text());
  });
  return page.addInitScript((prefix) => {
    const watch = (litegraph) => {
      const warned = new Set();
      litegraph.alwaysRepeatWarnings = true;
      litegraph.onDeprecationWarning?.splice(0, Infinity, (warning, source) => {
        if ((new Error().stack ?? "").includes("/extensions/cachedsearch/")) console.error(`${prefix}${warning}`);
        if (!warned.has(warning)) console.warn(warning, source);
        warned.add(warning);
      });
    };
    // the frontend assigns window.LiteGraph once, as it starts
    Object.defineProperty(window, "LiteGraph", {
      configurable: true,
      set(litegraph) {
        Object.defineProperty(window, "LiteGraph", { value: litegraph, writable: true, configurable: true });
        if (litegraph) watch(litegraph);
      },
    });
  }, DEPRECATED_USE);
}

// The frontend's progress texts ("draft 3 / 3 (seed …)", "rollout 9 / 9 ...") on CachedSearch nodes, as
// "node type: text".
export function progressTexts(page) {
  return page.evaluate(() => window.app.graph.nodes.filter((node) => node.type.startsWith("CachedSearch"))
    .flatMap((node) => (node.widgets ?? []).filter((w) => w.name === "$$node-text-preview")
      .map((w) => `${node.type}: ${w.value}`)));
}

// Sets widget `name` of the first node of `type` to `value` as typing it would (its callback runs).
export async function setWidget(page, type, name, value) {
  await page.evaluate(({ type, name, value }) => {
    const node = window.app.graph.nodes.find((n) => n.type === type);
    const widget = node.widgets.find((w) => w.name === name);
    widget.value = value;
    widget.callback?.(value);
    window.app.canvas.setDirty(true, true);
  }, { type, name, value });
}

// Has the server press Cancel at transformer call `call` of the `run`-th sampling run from now of a model through
// the test node CachedSearchTestPressCancel (tests/comfy_test_nodes).
export async function pressCancelAt(page, { run, call }) {
  const status = await page.evaluate((place) => window.comfyAPI.api.api.fetchApi("/cachedsearch_test/press_cancel",
    { method: "POST", body: JSON.stringify(place) }).then((response) => response.status), { run, call });
  if (status !== 200) throw new Error(`the server did not arm its Cancel press (${status})`);
}

// Resolves once the page has drawn and stopped moving: the canvas's zoom and offset and the boxes of every node
// element, result panel, wait banner and large view unchanged over three animation frames. The browser scripts
// wait on this instead of a fixed time after a load, a zoom or a run's last event; `what` names the step in the
// error when it does not settle within `timeout` ms.
export async function settled(page, what, timeout = 30000) {
  const stable = await page.evaluate(async (timeout) => {
    const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
    const signature = () => {
      const canvas = window.app?.canvas;
      const boxes = [...document.querySelectorAll(
        "[data-node-id], .cachedsearch-panel, .cachedsearch-wait, .cachedsearch-overlay, .cachedsearch-calibration")]
        .map((element) => {
          const box = element.getBoundingClientRect();
          return [box.x, box.y, box.width, box.height];
        });
      return JSON.stringify([canvas ? [canvas.ds.scale, ...canvas.ds.offset] : null, boxes]);
    };
    const deadline = performance.now() + timeout;
    let previous = null;
    let unchanged = 0;
    while (performance.now() < deadline) {
      await frame();
      const now = signature();
      unchanged = now === previous ? unchanged + 1 : 0;
      if (unchanged >= 2) return true;
      previous = now;
    }
    return false;
  }, timeout);
  if (!stable) throw new Error(`${what}: the page was still changing after ${timeout} ms`);
}

// Whether each frame on the panel of node type `type` has loaded (the scripts' `window.csPanel` finds the panel), read
// at the moment every one of them shows, waiting up to `timeout` ms; after that, as they are then. An empty panel
// is not "all loaded" (a panel not drawn yet once passed such a wait), and reading in the same step as the wait
// keeps a panel drawn again meanwhile from turning loaded frames into loading ones.
export async function loadedFrames(page, type, timeout = 120000) {
  const handle = await page.waitForFunction(({ type, deadline }) => {
    const frames = [...(window.csPanel(type)?.querySelectorAll("img") ?? [])]
      .map((image) => image.complete && image.naturalWidth > 0);
    return (frames.length > 0 && frames.every(Boolean)) || Date.now() > deadline ? frames : false;
  }, { type, deadline: Date.now() + timeout }, { timeout: timeout + 30000 });
  return handle.jsonValue();
}

// The canvas at 100 % with the node of id `id` at the top left, for a readable screenshot.
export async function showNodeById(page, id) {
  await page.evaluate((id) => {
    const node = window.app.graph.getNodeById(Number(id));
    const canvas = window.app.canvas;
    canvas.ds.scale = 1;
    canvas.ds.offset = [80 - node.pos[0], 160 - node.pos[1]];
    canvas.setDirty(true, true);
  }, id);
  await settled(page, `the view on node ${id}`);
}

// Opens the ComfyUI app at `url` in `page` and waits for its graph; with `workflow` (a workflow file's path) loads
// it and waits until the canvas has settled. Returns the frontend's version and whether Nodes 2.0 is on, as every
// script reports them.
export async function openWorkflow(page, url, workflow = null) {
  await page.goto(url);
  await page.waitForFunction(() => window.app?.graph && window.LiteGraph, null, { timeout: 120000 });
  const frontend = await page.evaluate(() => window.__COMFYUI_FRONTEND_VERSION__ ?? null);
  const vueNodes = await page.evaluate(() => window.app.extensionManager?.setting?.get?.("Comfy.VueNodes.Enabled") ??
    null);
  if (workflow) await loadWorkflow(page, workflow);
  return { frontend, vueNodes };
}

// Loads the workflow file at `path` (or a workflow object) into the open app and waits until the canvas settled.
export async function loadWorkflow(page, path) {
  const workflow = typeof path === "string" ? JSON.parse(readFileSync(path, "utf8")) : path;
  await page.evaluate((data) => window.app.loadGraphData(data), workflow);
  await settled(page, typeof path === "string" ? `the workflow ${path}` : "the workflow loaded");
}

// The next run that start() queues (the POST /prompt it sends): that request's body, its prompt id, execution ids,
// the Sampler's seed, width and steps, and, once it ends, the nodes ComfyUI served from its cache, each node's output
// and how it ended.
export async function nextRun(page, start, timeout = 300000) {
  await page.evaluate(() => {
    const api = window.comfyAPI.api.api;
    const runs = {};
    window.csRuns = runs;
    const of = (detail) => (runs[detail?.prompt_id] ??= { cached: [], executed: {}, end: null });
    api.addEventListener("execution_cached", ({ detail }) => of(detail).cached.push(...(detail.nodes ?? []).map(String)));
    api.addEventListener("executed", ({ detail }) => {
      of(detail).executed[String(detail.display_node ?? detail.node)] = detail.output;
    });
    for (const end of ["execution_success", "execution_error", "execution_interrupted"]) {
      api.addEventListener(end, ({ detail }) => { of(detail).end = end; });
    }
  });
  const response = page.waitForResponse((res) => res.request().method() === "POST" &&
    new URL(res.url()).pathname.endsWith("/prompt"), { timeout });
  await start();
  const answer = await response;
  const promptId = (await answer.json()).prompt_id;
  const body = JSON.parse(answer.request().postData());
  const prompt = body.prompt ?? {};
  const ids = Object.keys(prompt);
  const search = Object.values(prompt).find((node) => node.class_type === "CachedSearchSampler")?.inputs ?? {};
  const { seed, num_candidates: width, steps } = search;
  if (!promptId) return { body, promptId: null, ids, seed, width, steps, end: "refused" };
  await page.waitForFunction((id) => window.csRuns[id]?.end, promptId, { timeout });
  await settled(page, `the panels after run ${promptId}`);
  return { body, promptId, ids, seed, width, steps, ...(await page.evaluate((id) => window.csRuns[id], promptId)) };
}
