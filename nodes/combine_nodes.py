"""The nodes that combine verifiers: Combine Scores (their rankings of a search) and Combine Verifiers (one judge
for Calibrate, combined the same way)."""

from __future__ import annotations

from comfy_api.latest import io

from ..cachedsearch_core.combine import NORMALISATIONS, RANK_AVERAGE, VerifierCombination, combine_rankings
from .types import SHOW_RESULTS_WHEN_CACHED, Candidates, CombinedVerifier, RankingType, Verifier, VideoVerifier
from .ranking_panel import show_ranking


NORMALISATION_TOOLTIP = ("rank average (default): ranks scaled to [0, 1], robust to one verifier's outliers. z-score: "
                         "keeps margins, so a clear win counts more, but an outlier can dominate.")


class CombineScores(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="CachedSearchCombineScores",
            display_name="CachedSearch Combine Scores",
            category="CachedSearch",
            description="Ranks by several verifiers at once (e.g. ImageReward + VideoScore): each verifier's scores "
            "are normalised across the candidates, weighted and averaged. A guard against search gaming one "
            "verifier: a winner must look good to several judges. The table shows each verifier's column.",
            inputs=[
                Candidates.Input("candidates", tooltip="From the CachedSearch sampler whose drafts were ranked."),
                RankingType.Input("ranking_1", tooltip="A verifier's ranking of these candidates."),
                io.Float.Input("weight_1", default=1.0, min=0.0, max=100.0, step=0.1,
                               tooltip="Weight of ranking_1 (0 leaves it out)."),
                RankingType.Input("ranking_2", tooltip="Another verifier's ranking of the same candidates."),
                io.Float.Input("weight_2", default=1.0, min=0.0, max=100.0, step=0.1, tooltip="Weight of ranking_2."),
                io.Combo.Input("normalisation", options=list(NORMALISATIONS), default=RANK_AVERAGE,
                               tooltip=NORMALISATION_TOOLTIP),
                RankingType.Input("ranking_3", optional=True, tooltip="Optional third ranking."),
                io.Float.Input("weight_3", default=1.0, min=0.0, max=100.0, step=0.1, optional=True,
                               tooltip="Weight of ranking_3."),
            ],
            outputs=[
                RankingType.Output(display_name="ranking", tooltip="The combined ranking, for Recommit."),
                io.String.Output(display_name="scores", tooltip="One line per candidate: combined and each verifier."),
            ],
            **SHOW_RESULTS_WHEN_CACHED,
        )

    @classmethod
    def execute(cls, candidates, ranking_1, weight_1, ranking_2, weight_2, normalisation, ranking_3=None,
                weight_3=1.0) -> io.NodeOutput:
        pairs = [(ranking_1, weight_1), (ranking_2, weight_2)]
        if ranking_3 is not None:
            pairs.append((ranking_3, weight_3))
        for position, (ranking, _) in enumerate(pairs, start=1):
            if len(ranking.scores) != len(candidates):
                raise ValueError(f"ranking_{position}: has {len(ranking.scores)} scores but the search made "
                                 f"{len(candidates)} candidates; connect rankings of this sampler's drafts")
        combined = combine_rankings([ranking for ranking, _ in pairs], [weight for _, weight in pairs], normalisation)
        return show_ranking(combined, candidates)


class CombineVerifiers(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        judge = [Verifier, VideoVerifier]
        return io.Schema(
            node_id="CachedSearchCombineVerifiers",
            display_name="CachedSearch Combine Verifiers",
            category="CachedSearch",
            description="Several verifiers as one judge for CachedSearch Calibrate, combined exactly as Combine "
            "Scores combines their rankings of a search (each verifier's scores normalised across the seeds, "
            "weighted and averaged): calibrate with the same verifiers, weights and normalisation your search's "
            "Combine Scores uses.",
            inputs=[
                io.MultiType.Input("verifier_1", types=judge, tooltip="From CachedSearch Load ImageReward, Load CLIP "
                                   "Verifier or Load VideoScore."),
                io.Float.Input("weight_1", default=1.0, min=0.0, max=100.0, step=0.1,
                               tooltip="Weight of verifier_1 (0 leaves it out), as weight_1 on Combine Scores."),
                io.MultiType.Input("verifier_2", types=judge, tooltip="Another verifier."),
                io.Float.Input("weight_2", default=1.0, min=0.0, max=100.0, step=0.1, tooltip="Weight of verifier_2."),
                io.Combo.Input("normalisation", options=list(NORMALISATIONS), default=RANK_AVERAGE,
                               tooltip=NORMALISATION_TOOLTIP),
                io.MultiType.Input("verifier_3", types=judge, optional=True, tooltip="Optional third verifier."),
                io.Float.Input("weight_3", default=1.0, min=0.0, max=100.0, step=0.1, optional=True,
                               tooltip="Weight of verifier_3."),
            ],
            outputs=[CombinedVerifier.Output(display_name="verifier",
                                             tooltip="For CachedSearch Calibrate's verifier.")],
        )

    @classmethod
    def execute(cls, verifier_1, weight_1, verifier_2, weight_2, normalisation, verifier_3=None,
                weight_3=1.0) -> io.NodeOutput:
        pairs = [(verifier_1, weight_1), (verifier_2, weight_2)]
        if verifier_3 is not None:
            pairs.append((verifier_3, weight_3))
        return io.NodeOutput(VerifierCombination(tuple(verifier for verifier, _ in pairs),
                                                 tuple(weight for _, weight in pairs), normalisation))
