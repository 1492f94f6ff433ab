"""CachedSearch Calibrate, the Pruning Plan and the Distributed Sampler on LTX-2's packed [video, audio] latent (#50
item 5), on the tiny LTX-2 model through ComfyUI's loaders (ComfyUI 0.33; the tiny_ltx2 fixture skips on 0.3.75).

Calibrate rolls out the packed latent, decodes and scores its pictures: one prompt, and a family (a Gemma stand-in
on clip encodes one prompt per line, as the family workflow's text encoder would). A pruned search previews the
video of the sampler's packed x0 estimates and commits the winner exact in both parts. The Distributed Sampler
refuses a packed latent, naming latent_image (its drafts travel between machines as one tensor). What the tiny
model's calibration shows is printed for docs/calibration.md; real weights may differ.
"""

from __future__ import annotations

import pytest
import torch
from report_text import line_of, numbers, refusal
from test_ltx2 import CFG, STEPS, apply_cache, assert_parts_equal, ksampler

from scripts.tiny_ltx2 import LTX2_CHECKPOINT_FILE, LTX2_TINY_CONFIG

pytestmark = pytest.mark.slow  # in process, about a minute of tiny LTX-2 rollouts

TAUS = (0.05, 0.1, 0.2, 0.5)
SEEDS = 3
SAMPLING = dict(steps=STEPS, cfg=CFG, sampler_name="euler", scheduler="simple", denoise=1.0)


class GemmaStandIn:
    """What CLIPTextEncode calls on LTX-2's text encoder: each prompt's conditioning, 8 tokens of the width LTX-2's
    connectors read (twice the tiny caption width), drawn from the text."""

    def tokenize(self, text: str) -> str:
        return text

    def encode_from_tokens_scheduled(self, text: str) -> list:
        generator = torch.Generator().manual_seed(sum(map(ord, text)))
        width = 2 * LTX2_TINY_CONFIG["caption_channels"]
        return [[torch.randn((1, 8, width), generator=generator), {}]]


@pytest.fixture(scope="module")
def vae_and_verifier(engine):
    _, _, vae = engine.run("CheckpointLoaderSimple", ckpt_name=LTX2_CHECKPOINT_FILE)
    return vae, engine.one("CachedSearchLoadClipVerifier", model_folder="tiny-clip", dtype="fp32")


def calibrated(engine, tiny_ltx2, vae_and_verifier, **prompts) -> dict:
    model, _, negative, latent = tiny_ltx2
    vae, verifier = vae_and_verifier
    output = engine.output("CachedSearchCalibrate", model=model, negative=negative, latent_image=latent, vae=vae,
                           verifier=verifier, first_seed=0, seeds=SEEDS, taus=" ".join(map(str, TAUS)),
                           capture_target=0.85, warmup_steps=2, cooldown_steps=2, frames_per_candidate=4,
                           **SAMPLING, **prompts)
    print(output.result[1])  # the tiny model's table, for docs/calibration.md
    (shown,) = output.ui["cachedsearch_calibration"]
    return shown


def test_calibrate_measures_every_tau_on_one_prompt_of_the_packed_latent(engine, tiny_ltx2, vae_and_verifier):
    shown = calibrated(engine, tiny_ltx2, vae_and_verifier, positive=tiny_ltx2[1], prompt="a drum in a cellar")
    assert (shown["prompts"], shown["seeds"]) == (1, SEEDS)
    assert [row["tau"] for row in shown["rows"]] == list(TAUS)
    # the cache skips the whole packed call on this model, more at a larger tau
    skipped = [row["skipped"] for row in shown["rows"]]
    assert skipped[-1] > skipped[0] > 0
    assert shown["recommended_tau"] in (0.0, *TAUS)


def test_calibrate_runs_a_family_of_prompts_on_the_packed_latent(engine, tiny_ltx2, vae_and_verifier):
    shown = calibrated(engine, tiny_ltx2, vae_and_verifier, clip=GemmaStandIn(),
                       prompt="a drum in a cellar\nrain on a tin roof\na choir in a church")
    assert (shown["prompts"], shown["seeds"]) == (3, SEEDS)
    assert [row["tau"] for row in shown["rows"]] == list(TAUS) and shown["rows"][-1]["skipped"] > 0


def test_a_pruned_search_previews_the_video_and_commits_both_parts_exact(engine, tiny_ltx2, vae_and_verifier):
    model, positive, negative, latent = tiny_ltx2
    vae, verifier = vae_and_verifier
    plan = engine.one("CachedSearchPruningPlan", vae=vae, verifier=verifier, prompt="a drum", keep=2,
                      prune_fraction=0.4, prune_step=0, preview_frames=2)
    _, candidates, report = engine.run("CachedSearchSampler", model=apply_cache(engine, model), positive=positive,
                                       negative=negative, latent_image=latent, seed=3, num_candidates=3,
                                       pruning=plan, **SAMPLING)
    assert numbers(line_of(report, "pruned at step"))[:4] == [3, STEPS, 2, 3]  # step 3 of 8, kept 2 of 3
    assert len(candidates.drafts) == 2 and all(draft.calls_skipped > 0 for draft in candidates.drafts)
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores="0.1, 0.9")
    delivered, seed, _ = engine.run("CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit")
    assert seed == candidates.drafts[1].seed
    assert_parts_equal(delivered["samples"], ksampler(engine, tiny_ltx2, seed=seed))


def test_the_distributed_sampler_refuses_the_packed_latent_naming_latent_image(engine, tiny_ltx2):
    model, positive, negative, latent = tiny_ltx2
    with pytest.raises(ValueError, match=refusal("latent_image", "LTX-2", "CachedSearch Sampler (Advanced)")):
        engine.run("CachedSearchDistributedSampler", model=model, positive=positive, negative=negative,
                   latent_image=latent, seed=3, num_candidates=2, worker_timeout=60.0, **SAMPLING)
