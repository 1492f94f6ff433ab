// The artist's loop with the search nodes inside a subgraph (#53 item 10), in headless Debian Chromium against a
// real ComfyUI server: the tiny Wan 2.1 search's Sampler, decode, Verifier and Recommit converted into a subgraph
// the way an artist does it (select, Comfy.Graph.ConvertToSubgraph), a live run and "Commit this" on a draft the
// verifier did not choose; then that subgraph node converted again (a nested subgraph), the wait mode answered
// with "Keep this", "‹ earlier", and what the outer subgraph node shows from the top-level graph; a Calibrate
// converted into a subgraph shows its table after a run. Prints one JSON object with what it saw.
// Usage: node check_subgraph.mjs URL CONFIG.json
import { readFileSync } from "node:fs";
import {
  loadedFrames, loadWorkflow, nextRun as nextRunOn, openChromium, openWorkflow, pressCancelAt, recordExtensionErrors,
  settled,
} from "./chromium.mjs";

const [url, configPath] = process.argv.slice(2);
const config = JSON.parse(readFileSync(configPath, "utf8"));
const result = { frontend: null, vueNodes: null, extensionErrors: [], conversionErrors: [], failed: {} };

const { context, page } = await openChromium();
recordExtensionErrors(page, result.extensionErrors);
// what the frontend logs while it converts (an extension's error inside its conversion is logged, not thrown)
let converting = false;
// (a panel's caught error is a warning starting "CachedSearch"; the frontend's own 404s against an older server are
// noise)
page.on("console", (message) => {
  const text = message.text();
  const ours = text.startsWith("CachedSearch") || text.includes("NullGraphError") ||
    (message.location()?.url ?? "").includes("/extensions/cachedsearch/");
  if (converting && ours && ["error", "warning"].includes(message.type())) result.conversionErrors.push(text.slice(0, 300));
});
page.on("pageerror", (error) => {
  if (converting) result.conversionErrors.push(String(error.message).slice(0, 300));
});

// In the page: every node of the workflow with its execution id, subgraphs included (the test's own walk, so a
// broken one in the extension does not hide itself), and the first of a type.
const HELPERS = () => {
  window.csAll = (graph = window.app.graph, prefix = "") => (graph?.nodes ?? []).flatMap((node) => [
    { node, id: `${prefix}${node.id}` },
    ...(node.isSubgraphNode?.() && node.subgraph ? window.csAll(node.subgraph, `${prefix}${node.id}:`) : [])]);
  window.csFind = (type) => window.csAll().find((entry) => entry.node.type === type);
  window.csPanel = (type) => window.csFind(type)?.node.widgets?.find((w) => w.name === "cachedsearch_results")?.element;
};

// Selects the nodes of `types` ("subgraph": a subgraph node) in the graph shown and converts them into a subgraph as
// Ctrl+Shift+E does; returns the new subgraph node's id.
async function convert(types) {
  converting = true;
  try {
    const id = await page.evaluate(async (types) => {
      const canvas = window.app.canvas;
      const before = new Set(canvas.graph.nodes);
      const chosen = canvas.graph.nodes.filter((n) => types.includes(n.isSubgraphNode?.() ? "subgraph" : n.type));
      canvas.deselectAll?.();
      canvas.selectNodes(chosen);
      await window.app.extensionManager.command.execute("Comfy.Graph.ConvertToSubgraph");
      return canvas.graph.nodes.find((n) => n.isSubgraphNode?.() && !before.has(n))?.id ?? null;
    }, types);
    await settled(page, `converting ${types.join(", ")}`);
    return id;
  } finally {
    converting = false;
  }
}

// Shows the graph inside the subgraph nodes on the path `path` (execution ids of subgraph nodes, outermost first),
// or the top-level graph for [], the whole graph in view.
async function showGraph(path) {
  await page.evaluate((path) => {
    const canvas = window.app.canvas;
    canvas.setGraph(window.app.graph);
    for (const id of path) {
      const node = window.csAll().find((entry) => entry.id === id).node;
      canvas.openSubgraph(node.subgraph, node);
    }
    const nodes = canvas.graph.nodes;
    const left = Math.min(...nodes.map((n) => n.pos[0])) - 40;
    const top = Math.min(...nodes.map((n) => n.pos[1])) - 100;
    const right = Math.max(...nodes.map((n) => n.pos[0] + n.size[0])) + 40;
    const bottom = Math.max(...nodes.map((n) => n.pos[1] + n.size[1])) + 40;
    const rect = canvas.canvas.getBoundingClientRect();
    const scale = Math.min((rect.width - 120) / (right - left), (rect.height - 180) / (bottom - top), 1);
    canvas.ds.scale = scale;
    canvas.ds.offset[0] = 80 / scale - left;
    canvas.ds.offset[1] = 120 / scale - top;
    canvas.setDirty(true, true);
  }, path);
  await settled(page, `the graph ${path.join(" > ") || "top level"}`);
}

// The canvas at 100 % with the node of `type` at its top left (it must be in the graph shown).
async function zoomTo(type) {
  await page.evaluate((type) => {
    const canvas = window.app.canvas;
    const node = canvas.graph.nodes.find((n) => n.type === type || (type === "subgraph" && n.isSubgraphNode?.()));
    canvas.ds.scale = 1;
    canvas.ds.offset[0] = 60 - node.pos[0];
    canvas.ds.offset[1] = 200 - node.pos[1]; // below the breadcrumbs newer frontends draw over the canvas
    canvas.setDirty(true, true);
  }, type);
  await settled(page, `the view on ${type}`);
}

// Sets widget `name` of the first node of `type` anywhere in the workflow (its callback runs, as typing does), and
// the same widget promoted onto subgraph nodes (frontend 1.58 promotes a seed when converting: the prompt takes
// the promoted one's value).
const setWidget = (type, name, value) => page.evaluate(({ type, name, value }) => {
  const nodes = [window.csFind(type).node,
    ...window.csAll().map((entry) => entry.node).filter((node) => node.isSubgraphNode?.())];
  for (const widget of nodes.flatMap((node) => (node.widgets ?? []).filter((w) => w.name === name))) {
    widget.value = value;
    widget.callback?.(value);
  }
}, { type, name, value });

// Starts a run with `start` and resolves with the queued prompt's ids, what it reused and what each node showed.
const nextRun = (start) => nextRunOn(page, start);

const queueGraph = () => page.evaluate(() => window.app.queuePrompt(0, 1));
const panelText = (type) => page.evaluate((type) => window.csPanel(type)?.textContent ?? null, type);
const statusText = (type) => page.evaluate((type) =>
  window.csPanel(type)?.querySelector(".cachedsearch-status")?.textContent ?? null, type);
// Clicks the button `selector` in the panel of `type` (shown on the canvas: its graph is open).
const clickInPanel = (type, selector) => page.evaluate(({ type, selector }) => {
  const button = window.csPanel(type)?.querySelector(selector);
  if (!button) throw new Error(`no ${selector} on the ${type}'s panel`);
  button.click();
}, { type, selector });
const rowsOf = (type) => page.evaluate((type) => [...(window.csPanel(type)?.querySelectorAll("tr.candidate") ?? [])]
  .map((row) => ({ candidate: Number(row.dataset.candidate), seed: Number(row.dataset.seed),
    winner: row.classList.contains("winner") })), type);
// The text the subgraph node `id` (execution id) shows of the search inside it, from its own widgets.
const outsideText = (id) => page.evaluate((id) => {
  const node = window.csAll().find((entry) => entry.id === id)?.node;
  return (node?.widgets ?? []).filter((w) => w.element).map((w) => w.element.textContent).join(" ") || null;
}, id);

// Runs one part's checks; one that throws is recorded in result.failed and the next part still runs, so a run
// against code without the fixes shows every part's outcome.
async function section(name, checks) {
  try {
    await checks();
  } catch (error) {
    result.failed[name] = String(error.message ?? error).split("\n")[0].slice(0, 300);
  }
}

const RESUME_WIDTH = 6;
const RESUME_STEPS = 40;
const shot = (suffix) => page.screenshot({ path: config.screenshot.replace(/\.png$/, `_${suffix}.png`) });

try {
  Object.assign(result, await openWorkflow(page, url));
  await page.evaluate(HELPERS);

  let inner; // the subgraph node holding the search
  let outer; // the subgraph node holding that one
  await section("one subgraph", async () => {
    await loadWorkflow(page, config.tiny_workflow_fixed);
    // a search on the flat graph first: its nodes carry panels when they are converted (the panels' script threw
    // NullGraphError then)
    result.flatRun = (await nextRun(queueGraph)).end;
    inner = String(await convert(["CachedSearchSampler", "VAEDecode", "CachedSearchVerifier", "CachedSearchRecommit"]
      .filter((type, index, all) => all.indexOf(type) === index)));
    // the decode of the delivery is a VAEDecode too: both went in, which the subgraph's output then carries
    result.innerIds = await page.evaluate(() => window.csAll().filter((e) => e.node.type.startsWith("CachedSearch"))
      .map((e) => `${e.node.type} ${e.id}`));
    const run = await nextRun(queueGraph);
    result.firstRun = { end: run.end, ids: run.ids };
    await showGraph([inner]);
    result.firstRows = await rowsOf("CachedSearchVerifier");
    result.firstDelivery = await panelText("CachedSearchRecommit");
    result.samplerPanel = await panelText("CachedSearchSampler");
    result.framesLoaded = await loadedFrames(page, "CachedSearchVerifier");
    await zoomTo("CachedSearchVerifier");
    await shot("inner_verifier");
    // "Commit this" on a draft the verifier did not choose: the same prompt queued again with the pick
    const target = result.firstRows.find((row) => !row.winner);
    result.commitTarget = target;
    const picked = await nextRun(() => clickInPanel("CachedSearchVerifier",
      `tr.candidate[data-candidate="${target.candidate}"] button.cachedsearch-pick-commit`), 120000)
      .catch(async (error) => ({ end: `no run: ${error.message.split("\n")[0]}` }));
    result.commit = { end: picked.end, status: await statusText("CachedSearchVerifier"),
      delivery: await panelText("CachedSearchRecommit"),
      delivered: Object.values(picked.executed ?? {}).map((o) => o?.cachedsearch_delivery?.[0]).find(Boolean) ?? null };
    await zoomTo("CachedSearchRecommit");
    await shot("inner_recommit");
  });

  await section("nested subgraph", async () => {
    await showGraph([]);
    outer = String(await convert(["subgraph"]));
    inner = `${outer}:${inner}`;
    result.nestedIds = await page.evaluate(() => window.csAll().filter((e) => e.node.type.startsWith("CachedSearch"))
      .map((e) => `${e.node.type} ${e.id}`));
    // a new search in the nested subgraph, then wait mode on another: the banner shows on the Recommit, the run
    // waits for the click, Keep answers it
    const seed = await page.evaluate(() => window.csFind("CachedSearchSampler").node.widgets.find((w) => w.name === "seed").value);
    await setWidget("CachedSearchSampler", "seed", seed + 10);
    const plain = await nextRun(queueGraph);
    result.nestedRun = { end: plain.end, seed: plain.seed };
    await setWidget("CachedSearchSampler", "seed", seed + 20);
    await setWidget("CachedSearchRecommit", "wait_for_pick", true);
    await setWidget("CachedSearchRecommit", "pick", 0);
    await showGraph([outer, inner]);
    const waited = nextRun(queueGraph);
    await page.waitForFunction(() => window.csPanel("CachedSearchRecommit")?.querySelector(".cachedsearch-wait"), null,
      { timeout: 120000 }).catch(() => {});
    result.banner = await page.evaluate(() =>
      window.csPanel("CachedSearchRecommit")?.querySelector(".cachedsearch-wait")?.textContent ?? null);
    result.verifierWhileWaiting = await rowsOf("CachedSearchVerifier");
    await zoomTo("CachedSearchRecommit");
    await shot("nested_waiting");
    // what the outer subgraph node shows from the top-level graph while the Recommit inside waits
    await showGraph([]);
    result.outsideWaiting = await outsideText(outer);
    await zoomTo("subgraph");
    await shot("outside_waiting");
    await showGraph([outer, inner]);
    const target = result.verifierWhileWaiting.find((row) => !row.winner) ?? result.verifierWhileWaiting[0];
    result.keepTarget = target ?? null;
    if (target) {
      await clickInPanel("CachedSearchVerifier", `tr.candidate[data-candidate="${target.candidate}"] button.cachedsearch-pick-keep`)
        .catch((error) => { result.keepClick = error.message; });
    } else {
      await page.evaluate(() => window.comfyAPI.api.api.interrupt()); // nothing to click: end the wait
    }
    const answered = await waited;
    result.waitRun = { end: answered.end, seed: answered.seed,
      delivered: Object.values(answered.executed ?? {}).map((o) => o?.cachedsearch_delivery?.[0]).find(Boolean) ?? null,
      status: await statusText("CachedSearchVerifier"), delivery: await panelText("CachedSearchRecommit") };
    await setWidget("CachedSearchRecommit", "wait_for_pick", false);
    // "‹ earlier" on the Verifier: every panel shows the run before (the nested search's without the wait)
    await page.waitForFunction(() => window.csPanel("CachedSearchVerifier")?.querySelector("button.cachedsearch-earlier")
      ?.disabled === false, null, { timeout: 30000 }).catch(() => {}); // enabled once the history shows a run before
    await clickInPanel("CachedSearchVerifier", "button.cachedsearch-earlier");
    await page.waitForFunction(() => window.csPanel("CachedSearchVerifier")?.querySelector(".cachedsearch-runs span")
      ?.textContent.startsWith("earlier run"), null, { timeout: 30000 }).catch(() => {});
    result.earlierLabel = await page.evaluate(() =>
      window.csPanel("CachedSearchVerifier")?.querySelector(".cachedsearch-runs span")?.textContent ?? null);
    result.earlierRows = await rowsOf("CachedSearchVerifier");
    await zoomTo("CachedSearchVerifier");
    await shot("nested_earlier");
    // from the top-level graph, once the run ended
    await showGraph([]);
    result.outsideAfter = await outsideText(outer);
    await zoomTo("subgraph");
    await shot("outside");
  });

  await section("resume", async () => {
    // a search in the nested subgraph cancelled during its second draft: the Sampler inside offers to resume it,
    // and the click queues that search's seed again (the seed widgets were moved meanwhile, as randomize does)
    // seeds of this combination's own (config.resume_seed): drafts an earlier check on this server saved would be
    // read back without a step of progress, and the cancel would never come
    await setWidget("CachedSearchSampler", "seed", config.resume_seed);
    await setWidget("CachedSearchSampler", "num_candidates", RESUME_WIDTH);
    await setWidget("CachedSearchSampler", "steps", RESUME_STEPS);
    await showGraph([outer, inner]);
    const sampler = await page.evaluate(() => window.csFind("CachedSearchSampler").id);
    // the server presses Cancel in draft 2 (the test's CachedSearchTestPressCancel node feeds the Sampler): a Cancel
    // sent from here on a progress event lands wherever a busy server has got to by then
    await pressCancelAt(page, { run: 2, call: 3 });
    const stopped = await nextRun(queueGraph);
    result.resumeCancelled = { end: stopped.end, seed: stopped.seed, width: stopped.width, steps: stopped.steps };
    await page.waitForFunction(() => window.csFind("CachedSearchSampler").node.widgets
      .find((w) => w.name === "cachedsearch_resume")?.element.querySelector("button"), null, { timeout: 60000 });
    await setWidget("CachedSearchSampler", "seed", config.resume_seed + 100);
    await zoomTo("CachedSearchSampler");
    await shot("resume_offer");
    const resumed = await nextRun(() => page.evaluate(() => window.csFind("CachedSearchSampler").node.widgets
      .find((w) => w.name === "cachedsearch_resume").element.querySelector("button").click()));
    result.resumed = { end: resumed.end, seed: resumed.seed,
      cost: resumed.executed?.[sampler]?.cachedsearch_cost?.[0] ?? null };
  });

  await section("calibrate", async () => {
    if (!config.calibrate_workflow) return;
    await loadWorkflow(page, config.calibrate_workflow);
    const id = String(await convert(["CachedSearchCalibrate"]));
    const run = await nextRun(queueGraph, 900000);
    result.calibrateRun = run.end;
    await showGraph([id]);
    await page.waitForFunction(() => document.querySelectorAll(".cachedsearch-calibration tr.tau").length >= 1, null,
      { timeout: 30000 }).catch(() => {});
    result.calibrateRows = await page.$$eval(".cachedsearch-calibration tr.tau", (rows) => rows.length);
    await zoomTo("CachedSearchCalibrate");
    await shot("calibrate");
  });
} finally {
  await context.close();
}
console.log(JSON.stringify(result));
