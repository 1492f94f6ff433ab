"""Load ImageReward and Verifier nodes on real ComfyUI with the tiny ImageReward checkpoint (in process)."""

import os
import pathlib
import re

import pytest
import torch
from report_text import refusal

pytestmark = pytest.mark.slow  # in process, but several seconds a test: not in the fast tier


PROMPT = "a red ball on the grass"


@pytest.fixture(scope="module")
def drafted(engine, draft_tiny_wan):
    images, candidates = draft_tiny_wan(seed=5)
    verifier = engine.one("CachedSearchLoadImageReward", ckpt_name="ImageReward.pt", dtype="fp32")
    return images, candidates, verifier


def test_verifier_ranks_candidates_by_mean_reward_over_k_frames(engine, drafted):
    images, candidates, verifier = drafted
    assert images.shape[0] == 3 * 9
    ranking, text = engine.run("CachedSearchVerifier", images=images, candidates=candidates, prompt=PROMPT,
                               verifier=verifier, frames_per_candidate=4)
    expected = [verifier.score(PROMPT, images[[9 * i + p for p in (0, 3, 5, 8)]]).mean().item() for i in range(3)]
    assert list(ranking.scores) == pytest.approx(expected, abs=1e-6)
    assert ranking.winner == max(range(3), key=lambda i: expected[i])
    assert len(set(round(s, 6) for s in ranking.scores)) == 3
    assert text.splitlines()[ranking.winner].startswith("* candidate")
    delivered, seed, report = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="keep")
    assert seed == 5 + ranking.winner


def test_verifier_output_ui_shows_scored_frames_and_scores(engine, drafted):
    images, candidates, verifier = drafted
    node = engine.nodes["CachedSearchVerifier"]
    with torch.inference_mode():
        output = node.execute(images=images, candidates=candidates, prompt=PROMPT, verifier=verifier,
                              frames_per_candidate=8)
    # the table's rows show the drafts; no unlabelled image grid of the frontend's under it
    assert "images" not in output.ui
    assert output.ui["text"][0] == output.result[1]
    ranking = output.result[0]
    rows = output.ui["cachedsearch_ranking"]
    assert [(row["candidate"], row["seed"], row["score"]) for row in rows] == [
        (index + 1, 5 + index, ranking.scores[index]) for index in range(3)]
    order = sorted(range(3), key=lambda index: -ranking.scores[index])
    assert [rows[index]["rank"] for index in order] == [1, 2, 3] and rows[order[0]]["winner"]
    assert rows[order[0]]["margin"] == pytest.approx(ranking.scores[order[0]] - ranking.scores[order[1]])
    assert rows[order[2]]["margin"] == pytest.approx(ranking.scores[order[2]] - ranking.scores[order[0]])
    assert rows[order[2]]["margin"] < rows[order[1]]["margin"] < 0
    (described,) = output.ui["cachedsearch_verifier"]
    assert described["name"] == "ImageReward" and described["higher_is_better"] and described["scale"]
    # Each row shows the 8 frames the verifier scored (of 9: frame_indices), saved small in the output folder
    # (ComfyUI empties its temp folder at start and reuses the names), each reference naming its row's seed.
    for index, row in enumerate(rows):
        frames = engine.read_panel_frames(row["frames"])
        expected = engine.as_saved(images[[9 * index + pick for pick in (0, 1, 2, 3, 5, 6, 7, 8)]])
        assert len(frames) == 8 and all((a == b).all() for a, b in zip(frames, expected))
        assert {(frame["seed"], frame["subfolder"]) for frame in row["frames"]} == {(row["seed"], "cachedsearch_panels")}


def test_panel_frames_are_named_by_their_content_so_a_name_never_shows_another_picture(engine):
    """The same frames saved again (the same draft, after a restart) get the same names and no new files; other
    frames get other names, so a reference a saved panel keeps never comes to show another draft."""
    import folder_paths

    panel_frames = engine.extension.nodes.panel_frames
    save_panel_frames = panel_frames.save_panel_frames
    frames = torch.rand(4, 16, 16, 3, generator=torch.Generator().manual_seed(1))
    first = save_panel_frames(frames)
    folder = pathlib.Path(folder_paths.get_output_directory()) / panel_frames.PANEL_FOLDER
    files = sorted(folder.iterdir())
    assert save_panel_frames(frames.clone()) == first and sorted(folder.iterdir()) == files
    other = save_panel_frames(frames.flip(0) * 0.5)
    assert not {frame["filename"] for frame in other} & {frame["filename"] for frame in first}
    assert [(a == b).all() for a, b in zip(engine.read_panel_frames(first), engine.as_saved(frames))] == [True] * 4


def test_panel_frames_show_grey_and_alpha_frames_in_colour_and_save_nothing_of_frames_that_are_not_pictures(
        engine, monkeypatch, tmp_path):
    """A VAE's frames of 1 or 4 channels are shown as colour pictures (grey in three channels, alpha dropped);
    frames of another channel count (the ball-and-spot world's VAE stand-in hands over its 16 latent channels) save
    no picture and the row shows none, instead of failing the search that decoded them."""
    import folder_paths

    panel_frames = engine.extension.nodes.panel_frames
    monkeypatch.setattr(folder_paths, "output_directory", str(tmp_path))
    generator = torch.Generator().manual_seed(3)
    grey, alpha = torch.rand(2, 16, 16, 1, generator=generator), torch.rand(2, 16, 16, 4, generator=generator)
    saved = engine.read_panel_frames(panel_frames.save_panel_frames(grey))
    assert all((a == b).all() for a, b in zip(saved, engine.as_saved(grey.expand(-1, -1, -1, 3)), strict=True))
    saved = engine.read_panel_frames(panel_frames.save_panel_frames(alpha))
    assert all((a == b).all() for a, b in zip(saved, engine.as_saved(alpha[..., :3]), strict=True))
    before = sorted((tmp_path / panel_frames.PANEL_FOLDER).iterdir())
    assert panel_frames.save_panel_frames(torch.rand(3, 8, 8, 16, generator=generator)) == []
    assert sorted((tmp_path / panel_frames.PANEL_FOLDER).iterdir()) == before


def test_panel_frames_stay_under_their_cap_the_least_recently_saved_deleted_first(engine, monkeypatch, tmp_path):
    """Saving frames trims the panel folder to its cap, deleting the frames saved least recently (a frame saved
    again counts as new) and never the ones just saved, so searches do not fill the artist's output folder."""
    import folder_paths

    panel_frames = engine.extension.nodes.panel_frames
    monkeypatch.setattr(folder_paths, "output_directory", str(tmp_path))  # a folder of this test's own
    folder = tmp_path / panel_frames.PANEL_FOLDER
    generator = torch.Generator().manual_seed(2)
    tensors = [torch.rand(2, 16, 16, 3, generator=generator) for _ in range(3)]
    batches = [panel_frames.save_panel_frames(frames) for frames in tensors]
    names = [[reference["filename"] for reference in batch] for batch in batches]
    for age, batch in enumerate(names):  # saved a minute apart, the first batch oldest
        for name in batch:
            os.utime(folder / name, (1_000_000 + 60 * age,) * 2)
    sizes = {path.name: path.stat().st_size for path in folder.glob("*.png")}
    assert sorted(sizes) == sorted(sum(names, []))  # under the default cap: nothing deleted
    panel_frames.save_panel_frames(tensors[0][:1])  # the first batch's first frame saved again: now the newest
    cap = sum(sizes[name] for name in names[0][:1] + names[2])
    monkeypatch.setattr(panel_frames, "PANEL_FOLDER_MAX_BYTES", cap)
    newest = panel_frames.save_panel_frames(torch.rand(1, 16, 16, 3, generator=generator))
    kept = {path.name for path in folder.glob("*.png")}
    assert newest[0]["filename"] in kept and names[0][0] in kept and not set(names[1]) & kept
    assert sum(path.stat().st_size for path in folder.glob("*.png")) <= cap


@pytest.mark.parametrize("cut, prompt, message", [
    (1, PROMPT, "images: got 26 frames for 3 candidates"),
    (0, "   ", refusal("prompt", "empty")),
])
def test_verifier_input_errors_are_clear(engine, drafted, cut, prompt, message):
    images, candidates, verifier = drafted
    with pytest.raises(ValueError, match=message):
        engine.run("CachedSearchVerifier", images=images[cut:], candidates=candidates, prompt=prompt,
                   verifier=verifier, frames_per_candidate=8)


def test_nan_frames_are_rejected(engine, drafted):
    images, candidates, verifier = drafted
    broken = images.clone()
    broken[4] = float("nan")
    with pytest.raises(ValueError, match=refusal("images", "NaN")):
        engine.run("CachedSearchVerifier", images=broken, candidates=candidates, prompt=PROMPT, verifier=verifier,
                   frames_per_candidate=9)


def test_missing_checkpoint_names_the_folder(engine):
    message = engine.nodes["CachedSearchLoadImageReward"].validate_inputs(ckpt_name="missing.pt")
    assert re.match(refusal("ckpt_name", "'missing.pt'", "models/image_reward", "ImageReward.pt"), message), message
    assert str(pathlib.Path("models") / "image_reward") in message


def test_clip_verifier_ranks_through_the_same_node(engine, drafted):
    images, candidates, _ = drafted
    clip = engine.one("CachedSearchLoadClipVerifier", model_folder="tiny-clip", dtype="fp32")
    ranking, text = engine.run("CachedSearchVerifier", images=images, candidates=candidates, prompt=PROMPT,
                               verifier=clip, frames_per_candidate=3)
    expected = [clip.score(PROMPT, images[[9 * i + p for p in (0, 4, 8)]]).mean().item() for i in range(3)]
    assert list(ranking.scores) == pytest.approx(expected, abs=1e-5)
    assert ranking.verifier == "ClipScore"
    assert re.match(refusal("model_folder", "'absent'", "config.json"),
                    engine.nodes["CachedSearchLoadClipVerifier"].validate_inputs(model_folder="absent"))
