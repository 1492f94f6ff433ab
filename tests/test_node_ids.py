"""A node id of ours registered by another pack is said in one log line naming both packs (in process)."""

import logging

import pytest
from report_text import says


class OtherPacksRecommit:
    """What the report authors' pack would register under one of our ids."""

    RELATIVE_PYTHON_MODULE = "custom_nodes.ComfyUI-CachedSearch"


def test_a_clash_names_both_packs_and_our_own_registration_is_not_one(engine):
    node_ids = engine.extension.nodes.node_ids
    recommit = engine.nodes["CachedSearchRecommit"]
    (line,) = node_ids.clash_lines([recommit], {"CachedSearchRecommit": OtherPacksRecommit})
    assert "CachedSearchRecommit" in line and "custom_nodes.ComfyUI-CachedSearch" in line
    assert node_ids._pack_of(recommit) in line
    assert node_ids.clash_lines([recommit], dict(engine.nodes)) == []  # ours, as loaded


def test_the_pack_loaded_before_ours_is_logged_at_load(engine, caplog, monkeypatch):
    import nodes as comfy_nodes

    ours = [engine.nodes["CachedSearchSampler"], engine.nodes["CachedSearchRecommit"]]
    monkeypatch.setitem(comfy_nodes.NODE_CLASS_MAPPINGS, "CachedSearchRecommit", OtherPacksRecommit)
    with caplog.at_level(logging.WARNING, logger="CachedSearch"):
        engine.extension.nodes.node_ids.warn_about_clashes(ours)
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 1 and says(messages[0], "CachedSearchRecommit",
                                       OtherPacksRecommit.RELATIVE_PYTHON_MODULE), messages


@pytest.mark.parametrize("registered", ({}, {"SomethingElse": OtherPacksRecommit}))
def test_no_clash_no_line(engine, registered):
    assert engine.extension.nodes.node_ids.clash_lines([engine.nodes["CachedSearchRecommit"]], registered) == []
