"""Every input a node offers on the canvas is one its code accepts: an optional input the schema lists but the
node's function does not take fails with a TypeError the moment an artist connects it."""

import inspect
import pathlib
import re

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def schema_inputs(node_class) -> set[str]:
    declared = node_class.INPUT_TYPES()
    return {name for section in ("required", "optional") for name in declared.get(section, {})}


def accepted_inputs(node_class) -> set[str] | None:
    """The keyword arguments the node's function takes; None when it takes any (**kwargs)."""
    # a V3 node's FUNCTION is ComfyUI's generic entry point, which passes every input on to its execute()
    function = node_class.execute if hasattr(node_class, "define_schema") else getattr(node_class, node_class.FUNCTION)
    parameters = inspect.signature(function).parameters.values()
    if any(parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters):
        return None
    return {parameter.name for parameter in parameters}


def test_every_schema_input_is_accepted_by_the_node(engine):
    registered = {node_id: cls for node_id, cls in engine.nodes.items() if node_id.startswith("CachedSearch")}
    assert len(registered) >= 16
    assert sum(accepted_inputs(node_class) is not None for node_class in registered.values()) >= 16
    refused = {}
    for node_id, node_class in registered.items():
        accepted = accepted_inputs(node_class)
        if accepted is not None and (missing := sorted(schema_inputs(node_class) - accepted)):
            refused[node_id] = missing
    assert refused == {}


def panel_nodes() -> set[str]:
    """The node classes web/js draws a results panel on (the keys of each script's RENDERERS table)."""
    found = set()
    for script in (REPO_ROOT / "web" / "js").glob("*.js"):
        table = re.search(r"const RENDERERS = \{(.*?)\};", script.read_text(), re.S)
        if table:
            found |= set(re.findall(r"(CachedSearch\w+):", table.group(1)))
    return found


def test_every_node_with_a_panel_has_its_results_resent_when_reused(engine):
    """A re-queued graph reuses cached results without sending "executed"; ComfyUI 0.33 resends the results of
    nodes flagged has_intermediate_output (0.3.75 has no such flag; web/js/cachedsearch_reused.js reads the
    history there)."""
    panels = panel_nodes()
    assert {"CachedSearchVerifier", "CachedSearchRecommit", "CachedSearchCalibrate"} <= panels
    schemas = {node_id: engine.nodes[node_id].GET_SCHEMA() for node_id in panels}
    if not hasattr(schemas["CachedSearchVerifier"], "has_intermediate_output"):
        pytest.skip("this ComfyUI has no has_intermediate_output flag")
    unflagged = sorted(node_id for node_id, schema in schemas.items()
                       if not (schema.has_intermediate_output or schema.is_output_node))
    # Apply Cache's line names the calibration of the setup downstream of it, which its cached result does not
    # depend on: resent, it could name another setup's
    assert unflagged == ["CachedSearchApplyCache"]


# The nodes that sample like KSampler, and the settings each takes from it.
KSAMPLER_SETTINGS = {
    "CachedSearchSampler": ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise"),
    "CachedSearchDistributedSampler": ("seed", "steps", "cfg", "sampler_name", "scheduler", "denoise"),
    "CachedSearchSamplerExperts": ("seed", "steps", "cfg", "sampler_name", "scheduler"),
    "CachedSearchCalibrate": ("steps", "cfg", "sampler_name", "scheduler", "denoise"),
    "CachedSearchCalibrateExperts": ("steps", "cfg", "sampler_name", "scheduler"),
}
# Where a node narrows the stock range: two experts need a step each.
NARROWED = {("CachedSearchSamplerExperts", "steps"): {"min": 2}, ("CachedSearchCalibrateExperts", "steps"): {"min": 2}}


def test_ksampler_settings_have_this_comfyuis_own_ranges_and_options(engine):
    stock = engine.nodes["KSampler"].INPUT_TYPES()["required"]
    found = {}
    for node_id, names in KSAMPLER_SETTINGS.items():
        declared = engine.nodes[node_id].INPUT_TYPES()["required"]
        for name in names:
            kind, options = declared[name]
            stock_kind, stock_options = (*stock[name], {})[:2]
            if kind == "COMBO":  # a V3 combo lists its options in the settings; the stock node's are the kind
                kind = options["options"]
            expected = {key: stock_options[key] for key in ("min", "max", "step", "round", "control_after_generate")
                        if key in stock_options} | NARROWED.get((node_id, name), {})
            found[node_id, name] = (kind, {key: options.get(key) for key in expected})
            assert found[node_id, name] == (stock_kind, expected), (node_id, name)
    assert engine.nodes["CachedSearchCalibrate"].INPUT_TYPES()["required"]["first_seed"][1]["max"] == \
        stock["seed"][1]["max"]
    assert len(found) == sum(map(len, KSAMPLER_SETTINGS.values()))


def test_wait_for_pick_is_a_plain_input_and_the_pick_guards_are_advanced(engine):
    """Nodes 2.0 hides advanced inputs behind "Show advanced inputs": the artist's way to pick in the same run must
    not hide there; the pick's guards (pick_among, pick_timeout) may."""
    inputs = {entry.id: entry for entry in engine.nodes["CachedSearchRecommit"].GET_SCHEMA().inputs}
    if not hasattr(inputs["pick_among"], "advanced"):
        pytest.skip("this ComfyUI has no advanced inputs")
    assert not inputs["wait_for_pick"].advanced
    assert inputs["pick_among"].advanced and inputs["pick_timeout"].advanced
