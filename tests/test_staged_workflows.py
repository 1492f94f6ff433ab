"""The Wan 2.2 A14B workflows over HTTP: the delivered video equals the official two-KSamplerAdvanced graph
queued on the same server with the winning seed, with and without the 4-step LoRAs (and the GGUF workflow as
shipped, through ComfyUI-GGUF's loader, where its snapshot is), on the shipped 4-step path (no cache: the commit is
free) with and without pruning at the expert switch, and after the two-expert calibration that sets each expert's
tau."""

import copy
import json
import pathlib

import numpy
import pytest
from PIL import Image

from report_text import numbers
from scripts import node_packs
from scripts.graphs import tiny_workflow_variant
from scripts.workflow_format import BYPASSED_MODE

WORKFLOWS = pathlib.Path(__file__).resolve().parents[1] / "workflows"


def queued_graph(name, loras_on):
    """The API twin, and with ``loras_on`` the GUI file's two bypassed LoRA loaders switched on (spliced in
    between each expert's UNETLoader and ModelSamplingSD3, as the frontend queues them)."""
    gui = json.loads((WORKFLOWS / f"{name}.json").read_text())
    graph = json.loads((WORKFLOWS / "api" / f"{name}.json").read_text())
    bypassed = [node for node in gui["nodes"] if node.get("mode") == BYPASSED_MODE]
    assert [node["type"] for node in bypassed] == ["LoraLoaderModelOnly"] * 2  # shipped bypassed
    assert not {str(node["id"]) for node in bypassed} & set(graph)
    if loras_on:
        links = {link[0]: link for link in gui["links"]}
        for node in bypassed:
            lora_name, strength = node["widgets_values"]
            (model_link,) = [entry["link"] for entry in node["inputs"] if entry["name"] == "model"]
            (consumer_link,) = node["outputs"][0]["links"]
            source, consumer = str(links[model_link][1]), str(links[consumer_link][3])
            assert graph[consumer]["inputs"]["model"] == [source, 0]
            graph[str(node["id"])] = {"class_type": "LoraLoaderModelOnly", "inputs": {
                "model": [source, 0], "lora_name": lora_name, "strength_model": strength}}
            graph[consumer]["inputs"]["model"] = [str(node["id"]), 0]
    return graph


def key_of(graph, class_type):
    (key,) = [k for k, n in graph.items() if n["class_type"] == class_type]
    return key


def uncached(graph, link):
    """The model link under a CachedSearch Apply Cache node (the link itself when it comes from another node)."""
    node = graph[link[0]]
    return node["inputs"]["model"] if node["class_type"] == "CachedSearchApplyCache" else link


def official_variant(graph, seed):
    """The same graph delivering ``seed`` through the template's two KSamplerAdvanced nodes, uncached."""
    stock = copy.deepcopy(graph)
    search_key, recommit_key = key_of(stock, "CachedSearchSamplerExperts"), key_of(stock, "CachedSearchRecommit")
    search = stock[search_key]["inputs"]
    models = [uncached(stock, search[name]) for name in ("model_high", "model_low")]
    shared = {name: search[name] for name in ("positive", "negative", "steps", "cfg", "sampler_name", "scheduler")}
    stock["stage_high"] = {"class_type": "KSamplerAdvanced", "inputs": {
        **shared, "model": models[0], "add_noise": "enable", "noise_seed": seed, "latent_image": search["latent_image"],
        "start_at_step": 0, "end_at_step": search["split_step"], "return_with_leftover_noise": "enable"}}
    stock[recommit_key] = {"class_type": "KSamplerAdvanced", "inputs": {
        **shared, "model": models[1], "add_noise": "disable", "noise_seed": 0, "latent_image": ["stage_high", 0],
        "start_at_step": search["split_step"], "end_at_step": 10000, "return_with_leftover_noise": "disable"}}
    for key in [k for k, n in stock.items() if n["class_type"].startswith("CachedSearch") and k != recommit_key
                and n["class_type"] != "CachedSearchTestConditioning"]:
        del stock[key]
    for key in [k for k, n in stock.items()
                if n["class_type"] == "VAEDecode" and n["inputs"]["samples"][0] == search_key]:
        del stock[key]
    return stock


def frames(server, entry):
    return [numpy.asarray(Image.open(server.base_dir / "output" / image["subfolder"] / image["filename"]))
            for image in entry["outputs"]["frames"]["images"]]


# The GGUF workflow as shipped (LoRAs bypassed); tests/test_gguf.py runs its experts with the LoRAs in process.
@pytest.mark.parametrize("name, loras_on", [
    ("07 Wan 2.2 A14B two experts", False), ("07 Wan 2.2 A14B two experts", True),
    ("08 Wan 2.2 image to video", False), ("08 Wan 2.2 image to video", True),
    ("10 Wan 2.2 A14B GGUF", False)])
def test_a14b_workflow_delivers_the_official_graph_for_the_winner(comfy_server, name, loras_on):
    if "GGUF" in name and node_packs.GGUF.find_archive() is None:
        pytest.skip(f"{name}: {node_packs.GGUF.absent_reason()}")
    graph = tiny_workflow_variant(queued_graph(name, loras_on), pooled=False)
    assert ("LoraLoaderModelOnly" in {node["class_type"] for node in graph.values()}) == loras_on
    if loras_on:  # the note's 4-step settings
        graph[key_of(graph, "CachedSearchSamplerExperts")]["inputs"].update(steps=4, split_step=2, cfg=1.0)
        for node in graph.values():
            if node["class_type"] == "CachedSearchApplyCache":
                node["inputs"].update(warmup_steps=0, cooldown_steps=0)
    entry = comfy_server.run_prompt(graph)
    report = entry["outputs"][key_of(graph, "CachedSearchRecommit")]["text"][0]
    assert report.startswith("CachedSearch: 3 candidate(s), high noise: cache adaptive tau 0.15")
    assert "low noise: " in report and "calls skipped" in report
    stock = comfy_server.run_prompt(official_variant(graph, delivered_seed(entry, graph)))
    delivered, reference = frames(comfy_server, entry), frames(comfy_server, stock)
    assert len(delivered) == len(reference) == 9
    assert all((a == b).all() for a, b in zip(delivered, reference))


def test_a14b_calibrate_workflow_sets_each_experts_tau_and_remembers_it_for_both_caches(comfy_server):
    from cachedsearch_core.calibration_memory import experts_setup_key
    from scripts.tiny_models import WAN22_A14B_FILES

    graph = tiny_workflow_variant(queued_graph("11 Calibrate Wan 2.2 A14B", False), pooled=False)
    calibrate_key = key_of(graph, "CachedSearchCalibrateExperts")
    entry = comfy_server.run_prompt(graph)
    outputs = entry["outputs"]
    (shown,) = outputs[calibrate_key]["cachedsearch_calibration"]
    taus = shown["recommended_tau"]
    assert [(row["expert"], row["tau"]) for row in shown["rows"][:2]] == [("high-noise", 2.0), ("low-noise", 2.0)]
    report = outputs[key_of(graph, "CachedSearchRecommit")]["text"][0]
    # each calibrated tau went into its expert's Apply Cache, whose model that expert's stage sampled with
    assert report.startswith(f"CachedSearch: 3 candidate(s), high noise: cache adaptive tau {taus['high-noise']:g}")
    assert f"low noise: cache adaptive tau {taus['low-noise']:g}" in report
    high_file, low_file = WAN22_A14B_FILES["t2v"]
    assert experts_setup_key(high_file, low_file, 8, 4, "euler", "simple") in outputs[calibrate_key]["text"][0]
    for expert in ("high", "low"):
        (line,) = outputs[key_of_cache(graph, expert)]["cachedsearch_calibrated"]
        assert f"{expert}-noise expert" in line and numbers(line)[0] == taus[f"{expert}-noise"]
    stock = comfy_server.run_prompt(official_variant(graph, delivered_seed(entry, graph)))
    delivered, reference = frames(comfy_server, entry), frames(comfy_server, stock)
    assert len(delivered) == len(reference) == 9
    assert all((a == b).all() for a, b in zip(delivered, reference))


def key_of_cache(graph, expert):
    """The Apply Cache node on the ``expert`` ("high" or "low") input of the two-expert sampler."""
    return graph[key_of(graph, "CachedSearchSamplerExperts")]["inputs"][f"model_{expert}"][0]


def delivered_seed(entry, graph) -> int:
    """The seed Recommit delivered, from its panel's payload."""
    (delivery,) = entry["outputs"][key_of(graph, "CachedSearchRecommit")]["cachedsearch_delivery"]
    return delivery["seed"]


def test_four_step_workflow_commits_free_and_equals_the_official_graph_with_and_without_pruning(comfy_server):
    name = "09 Wan 2.2 A14B 4-step LoRA"
    graph = tiny_workflow_variant(json.loads((WORKFLOWS / "api" / f"{name}.json").read_text()), pooled=False)
    search_key = key_of(graph, "CachedSearchSamplerExperts")
    search = graph[search_key]["inputs"]
    search.update(steps=4, split_step=2)  # the template's 4-step split, not the tiny variant's 8 steps
    assert (search["cfg"], search["sampler_name"]) == (1.0, "euler")
    kinds = [node["class_type"] for node in graph.values()]
    assert "CachedSearchApplyCache" not in kinds and kinds.count("LoraLoaderModelOnly") == 2
    assert "pruning" not in search  # shipped off: the plan sits unconnected beside the sampler
    pruning_key = key_of(graph, "CachedSearchPruningPlan")
    assert graph[pruning_key]["inputs"]["prune_step"] == 2  # the expert switch

    pruned = copy.deepcopy(graph)
    pruned[search_key]["inputs"]["pruning"] = [pruning_key, 0]
    # the pruned search's one round: at step 2, 2 kept of the 3 scored
    for variant, rounds in ((graph, []), (pruned, [(2, 2, 3)])):
        entry = comfy_server.run_prompt(variant)
        report = entry["outputs"][key_of(variant, "CachedSearchRecommit")]["text"][0]
        assert report.count(": no cache") == 2  # neither expert cached
        assert [(shown["step"], len(shown["kept"]), len(shown["scored"]))
                for pruning in entry["outputs"][search_key].get("cachedsearch_pruning", [])
                for shown in pruning["rounds"]] == rounds
        (delivery,) = entry["outputs"][key_of(variant, "CachedSearchRecommit")]["cachedsearch_delivery"]
        assert (delivery["cost"]["commit_free"], delivery["cost"]["commit_seconds"]) == (True, 0.0)
        stock = comfy_server.run_prompt(official_variant(variant, delivered_seed(entry, variant)))
        delivered, reference = frames(comfy_server, entry), frames(comfy_server, stock)
        assert len(delivered) == len(reference) == 9
        assert all((a == b).all() for a, b in zip(delivered, reference))


def test_experts_node_reads_like_the_official_graph_with_tooltips(comfy_server):
    info = comfy_server.get("/object_info/CachedSearchSamplerExperts")["CachedSearchSamplerExperts"]
    inputs = info["input"]["required"]
    assert info["input_order"]["required"] == [
        "model_high", "model_low", "positive", "negative", "latent_image", "seed", "num_candidates", "steps",
        "split_step", "cfg", "sampler_name", "scheduler"]
    assert all(options[1].get("tooltip") for options in inputs.values())
    defaults = {name: inputs[name][1].get("default") for name in ("steps", "split_step", "cfg", "sampler_name",
                                                                   "scheduler")}
    assert defaults == {"steps": 20, "split_step": 10, "cfg": 3.5, "sampler_name": "euler", "scheduler": "simple"}
