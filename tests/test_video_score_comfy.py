"""VideoScore, Combine Scores and model-managed verifier weights on real ComfyUI (in process and over HTTP)."""

import re

import pytest
import torch

from cachedsearch_core import Ranking
from cachedsearch_core.combine import combine_rankings
from cachedsearch_core.video_score import ASPECTS, AVERAGE
from report_text import refusal, says
from scripts.graphs import combined_verifier_search

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier

PROMPT = "a red ball on the grass"


@pytest.fixture(scope="module")
def drafted(engine, draft_tiny_wan):
    images, candidates = draft_tiny_wan(seed=11)
    verifier = engine.one("CachedSearchLoadVideoScore", model_folder="VideoScore-v1.1", dtype="default")
    return images, candidates, verifier


@pytest.fixture
def management(engine):
    import comfy.model_management

    return comfy.model_management


def run_video_verifier(engine, drafted, **settings):
    images, candidates, verifier = drafted
    inputs = dict(images=images, candidates=candidates, prompt=PROMPT, verifier=verifier, max_frames=24,
                  rank_by=AVERAGE, aspect_weights="1, 1, 1, 1, 1")
    inputs.update(settings)
    with torch.inference_mode():
        return engine.nodes["CachedSearchVideoVerifier"].execute(**inputs)


def test_video_verifier_ranks_by_the_mean_of_five_aspects_over_the_whole_clip(engine, drafted):
    images, candidates, verifier = drafted
    output = run_video_verifier(engine, drafted)
    ranking, text = output.result
    aspects = [verifier.verifier.score_clip(PROMPT, images[9 * i : 9 * i + 9]) for i in range(3)]  # 9 <= 24: all
    assert list(ranking.scores) == pytest.approx([a.mean().item() for a in aspects], abs=1e-5)
    assert [name for name, _ in ranking.columns] == list(ASPECTS)
    for column, (name, values) in enumerate(ranking.columns):
        assert list(values) == pytest.approx([a[column].item() for a in aspects], abs=1e-5)
    assert len(set(round(s, 5) for s in ranking.scores)) == 3
    rows = output.ui["cachedsearch_ranking"]
    assert [row["seed"] for row in rows] == [11, 12, 13]
    assert set(rows[0]["columns"]) == set(ASPECTS) and sum(row["winner"] for row in rows) == 1
    assert rows[ranking.winner]["winner"] and text.splitlines()[ranking.winner].startswith("* candidate")
    assert "dynamic degree" in text.splitlines()[0] and ranking.verifier == "VideoScore"
    # the table's rows play each candidate's scored frames; no unlabelled preview grid under it
    assert "images" not in output.ui and all(row["frames"] for row in rows)


def test_one_aspect_or_weighted_aspects_can_rank(engine, drafted):
    by_average = run_video_verifier(engine, drafted).result[0]
    columns = dict(by_average.columns)
    by_alignment = run_video_verifier(engine, drafted, rank_by="text-to-video alignment").result[0]
    assert by_alignment.scores == pytest.approx(columns["text-to-video alignment"], abs=1e-6)
    assert says(by_alignment.verifier, "VideoScore", "(text-to-video alignment)")  # the verifier, then its aspect
    weighted = run_video_verifier(engine, drafted, rank_by="weighted", aspect_weights="0, 2, 0, 0, 1").result[0]
    expected = [(2 * a + b) / 3 for a, b in zip(columns["temporal consistency"], columns["factual consistency"])]
    assert weighted.scores == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError, match=refusal("aspect_weights", "'1, 2'")):
        run_video_verifier(engine, drafted, rank_by="weighted", aspect_weights="1, 2")


def test_frames_are_strided_to_max_frames(engine, drafted):
    images, _, verifier = drafted
    ranking = run_video_verifier(engine, drafted, max_frames=4).result[0]
    picks = [0, 2, 4, 6]  # floor(i * 9 / 4)
    expected = [verifier.verifier.score_clip(PROMPT, images[[9 * i + p for p in picks]]).mean().item()
                for i in range(3)]
    assert list(ranking.scores) == pytest.approx(expected, abs=1e-5)


def test_verifier_weights_are_loaded_and_offloaded_by_model_management(engine, drafted, management):
    _, _, verifier = drafted
    patcher = verifier.patcher
    assert patcher.model is verifier.verifier.network
    assert patcher.offload_device == management.unet_offload_device()
    management.unload_all_models()
    assert not any(loaded.model is patcher for loaded in management.current_loaded_models)
    first = run_video_verifier(engine, drafted).result[0]
    assert any(loaded.model is patcher for loaded in management.current_loaded_models)
    management.unload_all_models()
    assert not any(loaded.model is patcher for loaded in management.current_loaded_models)
    assert run_video_verifier(engine, drafted).result[0].scores == first.scores  # reloaded for the next scoring
    image_reward = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    assert image_reward.patcher.model is image_reward.verifier and image_reward.name == "ImageReward"
    image_reward.score(PROMPT, drafted[0][:2])
    assert any(loaded.model is image_reward.patcher for loaded in management.current_loaded_models)


def test_combine_scores_node_shows_every_verifier_column(engine, drafted):
    images, candidates, _ = drafted
    video = run_video_verifier(engine, drafted).result[0]
    image_reward = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    frame_ranking, _ = engine.run("CachedSearchVerifier", images=images, candidates=candidates, prompt=PROMPT,
                                  verifier=image_reward, frames_per_candidate=4)
    node = engine.nodes["CachedSearchCombineScores"]
    for normalisation in ("rank average", "z-score"):
        output = node.execute(candidates=candidates, ranking_1=frame_ranking, weight_1=1.0, ranking_2=video,
                              weight_2=2.0, normalisation=normalisation)
        combined, text = output.result
        expected = combine_rankings([frame_ranking, video], [1.0, 2.0], normalisation)
        assert combined.scores == pytest.approx(expected.scores) and combined.winner == expected.winner
        rows = output.ui["cachedsearch_ranking"]
        assert [set(row["columns"]) for row in rows] == [{"ImageReward", "VideoScore"}] * 3
        assert [row["columns"]["VideoScore"] for row in rows] == pytest.approx(list(video.scores))
        assert [row["score"] for row in rows] == pytest.approx(list(expected.scores))
        assert "ImageReward" in text and "VideoScore" in text
    with pytest.raises(ValueError, match=refusal("ranking_2", 2, 3)):  # 2 scores for 3 candidates
        node.execute(candidates=candidates, ranking_1=frame_ranking, weight_1=1.0, ranking_2=Ranking((1.0, 2.0)),
                     weight_2=1.0, normalisation="rank average")


def test_a_cancel_while_scoring_leaves_the_next_run_intact(engine, drafted, management):
    management.interrupt_current_processing(True)
    try:
        with pytest.raises(management.InterruptProcessingException):
            run_video_verifier(engine, drafted)
    finally:
        management.interrupt_current_processing(False)
    assert len(run_video_verifier(engine, drafted).result[0].scores) == 3


def test_missing_video_score_folder_is_named(engine):
    message = engine.nodes["CachedSearchLoadVideoScore"].validate_inputs(model_folder="absent")
    assert re.match(refusal("model_folder", "'absent'", "config.json", "models/video_score"), message), message
    assert "model.safetensors.index.json" in message and "preprocessor_config.json" in message
    assert "scripts/download_video_score.py" in message


def test_combined_search_runs_end_to_end_through_http(comfy_server):
    info = comfy_server.get("/object_info/CachedSearchVideoVerifier")["CachedSearchVideoVerifier"]
    assert info["input"]["required"]["rank_by"][1]["default"] == AVERAGE
    assert all(options[1].get("tooltip") for options in info["input"]["required"].values())
    assert info["input"]["required"]["max_frames"][1]["default"] == 24
    entry = comfy_server.run_prompt(combined_verifier_search(seed=40))
    rows = entry["outputs"]["combined"]["cachedsearch_ranking"]
    assert len(rows) == 3 and all(set(row["columns"]) == {"ImageReward", "VideoScore"} for row in rows)
    video_rows = entry["outputs"]["video_ranking"]["cachedsearch_ranking"]
    assert all(set(row["columns"]) == set(ASPECTS) for row in video_rows)
    winner = next(row for row in rows if row["winner"])
    assert winner["score"] == max(row["score"] for row in rows)
    assert f"winner: candidate {winner['candidate']}, seed {winner['seed']}" in entry["outputs"]["recommit"]["text"][0]
