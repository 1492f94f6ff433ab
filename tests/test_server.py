"""The extension inside a real ComfyUI server, driven over HTTP like the GUI does."""

import pytest

from scripts.graphs import cached_wan_sampling


def test_nodes_are_registered_with_tooltips_on_every_input(comfy_server):
    info = comfy_server.get("/object_info/CachedSearchApplyCache")["CachedSearchApplyCache"]
    assert info["display_name"] == "CachedSearch Apply Cache"
    assert info["category"] == "CachedSearch"
    inputs = info["input"]["required"]
    assert set(inputs) == {"model", "mode", "tau", "warmup_steps", "cooldown_steps", "static_interval"}
    assert all(options[1].get("tooltip") for options in inputs.values())
    assert inputs["mode"][1]["options"] == ["adaptive", "static", "off"]
    assert inputs["tau"][1]["default"] == 0.10 and inputs["tau"][1]["min"] == 0.0


def test_cached_sampling_runs_end_to_end_through_http(comfy_server):
    entry = comfy_server.run_prompt(cached_wan_sampling(seed=3, steps=12, tau=0.3, warmup_steps=2, cooldown_steps=2,
                                                        filename_prefix="e2e"))
    (image,) = entry["outputs"]["save"]["images"][:1]
    saved = comfy_server.base_dir / "output" / image["subfolder"] / image["filename"]
    assert saved.stat().st_size > 0
    assert len(entry["outputs"]["save"]["images"]) == 9  # one PNG per decoded frame
    assert "CachedSearch cache (adaptive, tau 0.3): computed" in comfy_server.log_tail(20000)


@pytest.mark.parametrize("field, value", [("tau", -0.1), ("warmup_steps", -1), ("cooldown_steps", -2)])
def test_negative_settings_are_rejected_at_validation_naming_the_input(comfy_server, field, value):
    graph = cached_wan_sampling(**{field: value})
    status, body = comfy_server.queue_prompt(graph)
    assert status == 400
    errors = body["node_errors"]["cache"]["errors"]
    assert any(field in (error.get("details", "") + str(error.get("extra_info", ""))) for error in errors)
    assert any("smaller than min" in error["message"] + error.get("details", "") for error in errors)
