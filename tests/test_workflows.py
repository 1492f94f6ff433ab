"""The example workflows against the live server: static validity, GUI/API twins, and real runs on tiny weights."""

import copy
import json
import pathlib

import numpy
import pytest
from PIL import Image
from report_text import line_of, numbers

from cachedsearch_core.pruning import PREVIEW_FRAMES, default_preview_frames
from scripts import node_packs
from scripts.ltx_workflow import FIRST_STAGE_SIGMAS, REFINE_SIGMAS
from scripts.graphs import tiny_workflow_variant
from scripts.subgraph_workflow import subgraph_shape
from scripts.workflow_format import (
    DYNAMIC_COMBO, FRONTEND_ONLY_NODES, SUBGRAPH_INPUT_NODE, SUBGRAPH_OUTPUT_NODE, declared_inputs, gui_to_api,
    gui_widget_slots, input_order_and_type, nodes_by_execution_id, subgraph_definitions, widget_specs,
)

WORKFLOWS = pathlib.Path(__file__).resolve().parents[1] / "workflows"
# Distributed workflows need ComfyUI-Distributed's nodes: tests/test_distributed.py checks them on its servers.
NAMES = sorted(path.stem for path in WORKFLOWS.glob("*.json") if "several GPUs" not in path.stem)


def needs_gguf_pack(name):
    """GGUF workflows load their experts with ComfyUI-GGUF's node: checked wherever its snapshot is (the test
    servers install it then), skipped with one line where it is absent."""
    if "GGUF" in name and node_packs.GGUF.find_archive() is None:
        pytest.skip(f"{name}: {node_packs.GGUF.absent_reason()}")


def runs_on(name, object_info):
    """LTX-2's nodes exist from ComfyUI 0.33 on: its workflow is checked where they are."""
    return "LTX-2" not in name or "LTXVConcatAVLatent" in object_info


def needs_ltx2(name, object_info):
    if not runs_on(name, object_info):
        pytest.skip(f"{name}: this ComfyUI has no LTX-2 nodes (they came with 0.33)")


@pytest.fixture(scope="module")
def object_info(comfy_server):
    return comfy_server.get("/object_info")


def load(name):
    return json.loads((WORKFLOWS / f"{name}.json").read_text()), json.loads((WORKFLOWS / "api" / f"{name}.json").read_text())


def input_spec(info, name):
    return {**info["input"].get("required", {}), **info["input"].get("optional", {})}[name]


def graphs_and_links(gui):
    """(the graph's nodes by id, its definition or None for the top level, (link id, origin, slot, target, target
    slot, type)) of every link of the workflow, those inside subgraphs included."""
    for graph, definition in [(gui, None), *((d, d) for d in subgraph_definitions(gui).values())]:
        nodes = {node["id"]: node for node in graph["nodes"]}
        for link in graph["links"]:
            yield nodes, definition, (tuple(link[key] for key in ("id", "origin_id", "origin_slot", "target_id",
                                                                 "target_slot", "type"))
                                      if isinstance(link, dict) else tuple(link))


def produced_type(nodes, definitions, definition, origin, slot, object_info):
    """The type a link's origin puts out: a node's output, a subgraph node's output or a subgraph's input."""
    if origin == SUBGRAPH_INPUT_NODE:
        return definition["inputs"][slot]["type"]
    if nodes[origin]["type"] in definitions:
        return definitions[nodes[origin]["type"]]["outputs"][slot]["type"]
    return object_info[nodes[origin]["type"]]["output"][slot]


def test_the_workflows_ship():
    assert NAMES == [
        "01 Wan 2.1 (start here)",
        "02 Wan 2.1 pruned search",
        "04 Calibrate tau, one prompt",
        "05 Calibrate a model family",
        "06 Wan 2.2 TI2V 5B search",
        "07 Wan 2.2 A14B two experts",
        "08 Wan 2.2 image to video",
        "09 Wan 2.2 A14B 4-step LoRA",
        "10 Wan 2.2 A14B GGUF",
        "11 Calibrate Wan 2.2 A14B",
        "12 HunyuanVideo search",
        "13 HunyuanVideo 1.5 + 1080p",
        "14 Wan 2.1 in a subgraph",
        "15 LTX-2.3 search + upscale",
        "16 Wan 2.1 searched wide",
    ]
    assert sorted(path.stem for path in (WORKFLOWS / "api").glob("*.json")
                  if "several GPUs" not in path.stem) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_workflow_nodes_links_and_widgets_are_valid_on_the_live_server(object_info, name):
    needs_gguf_pack(name)
    needs_ltx2(name, object_info)
    gui, api = load(name)
    definitions = subgraph_definitions(gui)
    for node in nodes_by_execution_id(gui).values():
        assert node["type"] in object_info or node["type"] in FRONTEND_ONLY_NODES | set(definitions), node["type"]
    for nodes, definition, (link_id, source, slot, target, target_slot, kind) in graphs_and_links(gui):
        produced = produced_type(nodes, definitions, definition, source, slot, object_info)
        if target == SUBGRAPH_OUTPUT_NODE:
            assert definition["outputs"][target_slot]["type"] == kind == produced, name
            continue
        entry = nodes[target]["inputs"][target_slot]
        assert entry["link"] == link_id
        info = object_info[nodes[target]["type"]]
        if source == SUBGRAPH_INPUT_NODE:  # a promoted widget: the subgraph input has the widget's type
            assert entry["widget"]["name"] == entry["name"] and \
                kind == produced == input_order_and_type(info, entry["name"])[1], (name, entry["name"])
            continue
        expected = input_spec(info, entry["name"])[0]
        assert kind == produced and produced in expected.split(","), (name, entry["name"])  # "A,B": either type
    for key, node in declared_inputs(api, object_info).items():
        specs = widget_specs(object_info[node["class_type"]], node["inputs"])
        for input_name, value in node["inputs"].items():
            if isinstance(value, list) or input_name not in specs:
                continue
            spec = specs[input_name]
            options = spec[1] if len(spec) > 1 else {}
            choices = spec[0] if isinstance(spec[0], list) else options.get("options")
            if spec[0] == DYNAMIC_COMBO:
                choices = [option["key"] for option in choices]
            if choices is not None:
                assert value in choices, (name, node["class_type"], input_name, value)
            if "min" in options:
                assert value >= options["min"], (name, input_name)
            if "max" in options:
                assert value <= options["max"], (name, input_name)


def test_every_node_from_a_pack_names_its_pack_for_the_missing_nodes_dialog(object_info):
    """A node CachedSearch or another pack provides carries its registry id and repository, so the frontend and
    ComfyUI-Manager name the pack and offer to install it where it is missing; ComfyUI's own nodes carry none."""
    own = node_packs.own_workflow_properties()
    known = {own["cnr_id"], *(pack.registry_id for pack in node_packs.PACKS)}
    checked = set()
    for path in [path for path in sorted(WORKFLOWS.glob("*.json")) if runs_on(path.stem, object_info)]:
        gui = json.loads(path.read_text())
        for node in nodes_by_execution_id(gui).values():
            if node["type"] in subgraph_definitions(gui):
                continue  # a subgraph node: its nodes inside are checked
            info = object_info.get(node["type"])
            module = info.get("python_module", "") if info is not None else None
            if node["type"] in FRONTEND_ONLY_NODES or (module is not None and not module.startswith("custom_nodes.")):
                assert "cnr_id" not in node["properties"], (path.name, node["type"])
                continue
            expected = own if node["type"].startswith("CachedSearch") else None
            assert node["properties"].get("cnr_id") in known and node["properties"].get("aux_id"), \
                (path.name, node["type"])
            if expected is not None:
                assert {key: node["properties"][key] for key in expected} == expected, (path.name, node["type"])
            checked.add(node["type"])
    assert {"DistributedCollector", "UnetLoaderGGUF", "CachedSearchSampler"} <= checked


@pytest.mark.parametrize("name", NAMES)
def test_gui_file_and_api_twin_describe_the_same_graph(object_info, name):
    """What this runtime's frontend queues for the GUI file is the API twin, less the inputs its nodes do not
    declare (the files are built on the newest runtime; an older one ignores what its nodes lack)."""
    needs_gguf_pack(name)
    needs_ltx2(name, object_info)
    gui, api = load(name)
    assert gui_to_api(gui, object_info) == declared_inputs(api, object_info)
    note = [node for node in gui["nodes"] if node["type"] == "MarkdownNote"][0]["widgets_values"][0]
    headline = "explore wide, commit free" if "4-step" in name else "explore cheap, commit full"
    assert headline in note and ("models/diffusion_models/" in note or "models/checkpoints/" in note)


@pytest.mark.parametrize("name", NAMES)
def test_queueing_the_workflow_again_searches_a_fresh_seed_range(object_info, name):
    gui, _ = load(name)
    (sampler,) = [node for node in nodes_by_execution_id(gui).values() if node["type"].startswith("CachedSearchSampler")]
    slots = gui_widget_slots(sampler, object_info[sampler["type"]])
    seed_index = [slot_name for slot_name, _ in slots].index("seed")
    assert slots[seed_index + 1] == (None, "randomize")  # fixed would repeat the search, increment N - 1 seeds
    tooltip = object_info[sampler["type"]]["input"]["required"]["seed"][1]["tooltip"]
    assert "seed + num_candidates - 1" in tooltip and "randomize" in tooltip and "fixed" in tooltip


@pytest.mark.parametrize("name", NAMES)
def test_the_prompt_is_typed_once_and_shared_with_the_verifier(name):
    _, api = load(name)
    (prompt_id,) = [key for key, node in api.items() if node["class_type"] == "PrimitiveStringMultiline"]
    (verifier,) = [node for node in api.values() if node["class_type"] == "CachedSearchVerifier"]
    assert verifier["inputs"]["prompt"] == [prompt_id, 0]
    for plan in [node for node in api.values() if node["class_type"] == "CachedSearchPruningPlan"]:
        assert plan["inputs"]["prompt"] == [prompt_id, 0]  # previews judged against the same text
        assert plan["inputs"]["verifier"] == verifier["inputs"]["verifier"]
    encoders = [node for node in api.values() if node["class_type"] == "CLIPTextEncode"]
    assert any(node["inputs"]["text"] == [prompt_id, 0] for node in encoders)


def stock_variant(graph, seed):
    """The same graph delivering ``seed`` with a stock KSampler / SamplerCustomAdvanced on the uncached model."""
    stock = copy.deepcopy(graph)
    (search_key,) = [k for k, n in stock.items() if n["class_type"].startswith("CachedSearchSampler")]
    (recommit_key,) = [k for k, n in stock.items() if n["class_type"] == "CachedSearchRecommit"]
    (cache_key,) = [k for k, n in stock.items() if n["class_type"] == "CachedSearchApplyCache"]
    uncached = stock[cache_key]["inputs"]["model"]
    search = stock[search_key]["inputs"]
    if stock[search_key]["class_type"] == "CachedSearchSampler":
        stock[recommit_key] = {"class_type": "KSampler", "inputs": {
            **{k: v for k, v in search.items() if k not in ("num_candidates", "pruning", "budget")},
            "model": uncached, "seed": seed}}
    else:
        for node in stock.values():
            if node["inputs"].get("model") == [cache_key, 0]:  # the guider and scheduler of the search
                node["inputs"]["model"] = uncached
        stock["noise"] = {"class_type": "RandomNoise", "inputs": {"noise_seed": seed}}
        stock[recommit_key] = {"class_type": "SamplerCustomAdvanced", "inputs": {
            "noise": ["noise", 0], "guider": search["guider"], "sampler": search["sampler"],
            "sigmas": search["sigmas"], "latent_image": search["latent_image"]}}
    for key in [k for k, n in stock.items() if n["class_type"].startswith("CachedSearch") and k != recommit_key
                and not n["class_type"].startswith("CachedSearchTest")]:
        del stock[key]
    while dangling := [k for k, n in stock.items()  # the drafts' decode and what fed only the search
                       if any(isinstance(v, list) and v[0] not in stock for v in n["inputs"].values())]:
        for key in dangling:
            del stock[key]
    return stock


def frames(server, entry):
    return [numpy.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"]["frames"]["images"]]


def sounds(server, entry):
    """The waveforms the tiny variant's CachedSearchTestSaveWaveform wrote, as float32 samples."""
    return [numpy.fromfile(server.base_dir / "output" / saved["subfolder"] / saved["filename"], dtype=numpy.float32)
            for saved in entry["outputs"]["sound"]["waveforms"]]


@pytest.mark.parametrize("name, pooled", [("01 Wan 2.1 (start here)", False),
                                          ("12 HunyuanVideo search", True),
                                          ("06 Wan 2.2 TI2V 5B search", False),
                                          ("02 Wan 2.1 pruned search", False),
                                          ("14 Wan 2.1 in a subgraph", False),
                                          ("15 LTX-2.3 search + upscale", False)])
@pytest.mark.slow
def test_workflow_runs_end_to_end_and_delivers_the_stock_result_for_the_winner(comfy_server, object_info, name,
                                                                              pooled):
    """For LTX-2.3 the search drafts the first stage and only the winner is upsampled and refined: the delivered
    frames and sound are the stock two-stage pipeline's for the winning seed (with the tiny distilled LoRA)."""
    needs_ltx2(name, object_info)
    _, api = load(name)
    graph = tiny_workflow_variant(api, pooled)
    entry = comfy_server.run_prompt(graph)
    (recommit_key,) = [k for k, n in graph.items() if n["class_type"] == "CachedSearchRecommit"]
    (save_key,) = [k for k, n in graph.items() if n["class_type"] == "SaveVideo"]
    report = entry["outputs"][recommit_key]["text"][0]
    pruned = "pruned" in name  # 3 drafts to the prune step, the best 2 previews finished
    assert report.startswith(f"CachedSearch: {2 if pruned else 3} candidate(s)")
    (video,) = entry["outputs"][save_key]["images"]
    assert (comfy_server.base_dir / "output" / video["subfolder"] / video["filename"]).stat().st_size > 0
    if pruned:
        assert "pruned at step 3 of 8: kept 2 of 3" in report, report
    winner_seed = int(report.split("winner: candidate ")[1].split("seed ")[1].split(",")[0])
    stock = comfy_server.run_prompt(stock_variant(graph, winner_seed))
    delivered, reference = frames(comfy_server, entry), frames(comfy_server, stock)
    assert len(delivered) == len(reference) == 9
    assert all((a == b).all() for a, b in zip(delivered, reference))
    if "sound" in graph:  # LTX-2: the second stage counted once, and the sound of the winner too, sample for sample
        refine, first_stage = (len(sigmas.split(",")) - 1 for sigmas in (REFINE_SIGMAS, FIRST_STAGE_SIGMAS))
        second_stage = numbers(line_of(report, "second stage"))
        assert (second_stage[0], second_stage[2]) == (refine, 3 * (first_stage + refine))
        (sound,), (stock_sound,) = sounds(comfy_server, entry), sounds(comfy_server, stock)
        assert sound.std() > 0 and numpy.array_equal(sound, stock_sound)


@pytest.mark.parametrize("name, refine_steps", [("13 HunyuanVideo 1.5 + 1080p", 8),
                                                ("15 LTX-2.3 search + upscale", len(REFINE_SIGMAS.split(",")) - 1)])
def test_the_recommit_plans_the_second_stage_its_latent_feeds(engine, name, refine_steps):
    """The second stage after the Recommit, counted in its cost: 1080p super-resolution's 8 Basic Scheduler steps
    split in two samplers, LTX-2.3's 3 Manual Sigmas steps; the one-stage workflows have none."""
    if "ManualSigmas" not in engine.nodes and "LTX" in name:
        pytest.skip(f"{name}: this ComfyUI has no LTX-2 nodes (they came with 0.33)")
    second_stage_calls = engine.extension.nodes.second_stage.second_stage_calls
    for workflow in (name, "01 Wan 2.1 (start here)"):
        _, api = load(workflow)
        (recommit,) = [key for key, node in api.items() if node["class_type"] == "CachedSearchRecommit"]
        assert second_stage_calls(api, recommit) == (refine_steps if workflow == name else None)


@pytest.mark.slow
def test_the_family_calibration_workflow_runs_on_tiny_weights(comfy_server):
    """The family workflow's tiny variant (its first prompt: there is no tiny text encoder) calibrates and searches
    with the calibrated tau."""
    _, api = load("05 Calibrate a model family")
    entry = comfy_server.run_prompt(tiny_workflow_variant(api, pooled=False))
    assert entry["status"]["status_str"] == "success", entry["status"]
    (calibrate_key,) = [key for key, node in api.items() if node["class_type"] == "CachedSearchCalibrate"]
    (shown,) = entry["outputs"][calibrate_key]["cachedsearch_calibration"]
    assert (shown["prompts"], shown["seeds"], [row["tau"] for row in shown["rows"]]) == (1, 2, [2.0])


WIDE, CALIBRATE = "16 Wan 2.1 searched wide", "04 Calibrate tau, one prompt"


def node_of(graph, class_type) -> dict:
    (node,) = [node for node in graph.values() if node["class_type"] == class_type]
    return node["inputs"]


def test_the_wide_search_is_set_as_the_calibrate_workflow_so_its_calibration_is_the_one_used():
    """Budget "auto" uses a calibration of the same model file, steps, sampler, scheduler, cache window, verifier
    and preview frames, at a calibrated tau: workflow 16 has workflow 04's, so an artist who ran 04 gets auto."""
    _, wide = load(WIDE)
    _, calibrate_api = load(CALIBRATE)
    calibrate = node_of(calibrate_api, "CachedSearchCalibrate")
    search, cache = node_of(wide, "CachedSearchSampler"), node_of(wide, "CachedSearchApplyCache")
    assert {name: search[name] for name in ("steps", "cfg", "sampler_name", "scheduler", "denoise")} == \
        {name: calibrate[name] for name in ("steps", "cfg", "sampler_name", "scheduler", "denoise")}
    assert (cache["warmup_steps"], cache["cooldown_steps"]) == (calibrate["warmup_steps"], calibrate["cooldown_steps"])
    assert cache["tau"] in [float(tau) for tau in calibrate["taus"].split()]
    for kind in ("UNETLoader", "CachedSearchLoadImageReward"):
        assert node_of(wide, kind) == node_of(calibrate_api, kind)
    pruning, budget = node_of(wide, "CachedSearchPruningPlan"), node_of(wide, "CachedSearchBudget")
    assert (pruning["schedule"], pruning["preview_frames"]) == ("auto", PREVIEW_FRAMES)  # Calibrate's previews' frames
    assert (budget["choose"], budget["budget_rollouts"], budget["budget_unit"]) == ("auto", 8, "transformer calls")
    assert search["budget"][0] == next(key for key, node in wide.items() if node["class_type"] == "CachedSearchBudget")
    # Auto drafts at most the seeds calibrated (and needs M of them): the note asks 04 for max_candidates seeds.
    gui, _ = load(WIDE)
    note = [node for node in gui["nodes"] if node["type"] == "MarkdownNote"][0]["widgets_values"][0]
    assert f"`seeds` raised to {budget['max_candidates']}**" in note and budget["max_candidates"] >= 8


def tiny_calibrate_then_wide(seeds: int) -> tuple[dict, dict]:
    """Workflows 04's and 16's tiny variants, 16 set as 04's tiny calibration of ``seeds`` seeds (the tiny variants
    change the tau, the cache window and the preview frames each in its own way): the plan previews the frames
    Calibrate's previews show (all 3 of the tiny latent's, fewer than the default 4), the cache's tau is the
    calibrated one."""
    calibrate, wide = (tiny_workflow_variant(load(name)[1], pooled=False) for name in (CALIBRATE, WIDE))
    calibrate_inputs = node_of(calibrate, "CachedSearchCalibrate")
    calibrate_inputs["seeds"] = seeds
    node_of(wide, "CachedSearchPruningPlan")["preview_frames"] = default_preview_frames(3)
    node_of(wide, "CachedSearchApplyCache")["tau"] = float(calibrate_inputs["taus"])
    assert {name: node_of(wide, "CachedSearchApplyCache")[name] for name in ("warmup_steps", "cooldown_steps")} == \
        {name: calibrate_inputs[name] for name in ("warmup_steps", "cooldown_steps")}
    return calibrate, wide


@pytest.mark.slow  # three searches and two calibrations through a server of its own
def test_the_wide_search_drafts_as_today_until_workflow_04_calibrates_enough_seeds_then_searches_as_chosen(
        start_comfy_server):
    """The note's fallback lines, then auto: with no calibration, and with 04's tiny calibration of 2 seeds (fewer
    than the budget's 8), the search says why auto is not used; after one of 8 seeds it searches as that
    calibration chose, within the budget, and delivers the stock result for the winning seed."""
    server = start_comfy_server("searched_wide")
    seed = 42

    def searched(wide) -> tuple[dict, dict]:
        nonlocal seed
        seed += 100  # the next queue of a randomized seed (the same seed would be ComfyUI's cached result)
        node_of(wide, "CachedSearchSampler")["seed"] = seed
        entry = server.run_prompt(wide)
        (search,) = [entry["outputs"][key] for key, node in wide.items() if node["class_type"] == "CachedSearchSampler"]
        return entry, search["cachedsearch_budget"][0]

    calibrate, wide = tiny_calibrate_then_wide(seeds=2)
    assert "a Calibrate run on this model" in searched(wide)[1]["auto"]["line"]
    server.run_prompt(calibrate)
    assert "calibrate at least 8 seeds" in searched(wide)[1]["auto"]["line"]
    calibrate, wide = tiny_calibrate_then_wide(seeds=8)
    server.run_prompt(calibrate)
    entry, budget = searched(wide)
    auto = budget["auto"]
    assert auto["used"] is True and (auto["prompts"], auto["seeds"]) == (1, 8), auto
    (search_key,) = [key for key, node in wide.items() if node["class_type"] == "CachedSearchSampler"]
    (cost,) = entry["outputs"][search_key]["cachedsearch_cost"]
    assert cost["search_calls"] + budget["full_cost"] <= budget["budget"] == 8 * budget["full_cost"]
    (recommit,) = [entry["outputs"][key] for key, node in wide.items() if node["class_type"] == "CachedSearchRecommit"]
    assert auto["line"] in recommit["text"][0]
    winner_seed = recommit["cachedsearch_delivery"][0]["seed"]
    stock = server.run_prompt(stock_variant(wide, winner_seed))
    assert all((a == b).all() for a, b in zip(frames(server, entry), frames(server, stock), strict=True))


def test_the_subgraph_workflow_is_the_start_here_search_in_the_official_templates_shape():
    """The pipeline of `01 Wan 2.1 (start here)` in one subgraph: on the top level only its node, SaveVideo and the
    note; the node shows the inputs set on every run, each promoted from the inner widget it feeds (proxyWidgets);
    what it queues is 01's graph with the inner nodes' ids as paths ("18:10")."""
    gui, api = load("14 Wan 2.1 in a subgraph")
    _, flat = load("01 Wan 2.1 (start here)")
    shape = subgraph_shape(gui)
    assert sorted(node["type"] for node in gui["nodes"] if node["type"] not in subgraph_definitions(gui)) == \
        ["MarkdownNote", "SaveVideo"]
    (node,) = [node for node in gui["nodes"] if node["type"] in subgraph_definitions(gui)]
    assert node["widgets_values"] == [] and all(entry["link"] is None for entry in node["inputs"])
    inner = {key: api[key]["class_type"] for key, _, _ in shape["promoted"]}
    assert [(inner[key], name) for key, name, _ in shape["promoted"]] == [
        ("PrimitiveStringMultiline", "value"), ("EmptyHunyuanLatentVideo", "width"),
        ("EmptyHunyuanLatentVideo", "height"), ("EmptyHunyuanLatentVideo", "length"),
        ("CachedSearchSampler", "seed"), ("CachedSearchSampler", "num_candidates"), ("CachedSearchSampler", "steps"),
        ("UNETLoader", "unet_name"), ("CLIPLoader", "clip_name"), ("VAELoader", "vae_name"),
        ("CachedSearchLoadImageReward", "ckpt_name")]
    assert node["properties"]["proxyWidgets"] == [[key.split(":")[1], name] for key, name, _ in shape["promoted"]]
    assert [key for key in api if ":" not in key] == [str(n["id"]) for n in gui["nodes"] if n["type"] == "SaveVideo"]
    assert {key.split(":")[-1]: {"class_type": n["class_type"], "inputs": {
        input_name: [value[0].split(":")[-1], value[1]] if isinstance(value, list) else value
        for input_name, value in n["inputs"].items()}} for key, n in api.items()} == flat
