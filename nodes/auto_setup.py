"""What Budget "auto" compares between a calibration and a search, read from the API prompt's graph and the
models: the verifier (the loader at the root of a node's verifier input, with its settings) and the step cache's
warmup, cooldown and tau; and the tables Calibrate remembers for the chooser (``auto_policy.policy_record``)."""

from __future__ import annotations

from ..cachedsearch_core import CacheMode
from ..cachedsearch_core.audit import FULL_ARM, ScoreStore
from ..cachedsearch_core.auto_policy import PolicySetup, policy_record
from ..cachedsearch_core.previews import RolloutPreviews
from .cache_patch import step_cache_config


def verifier_identity(prompt: dict | None, node_id, input_name: str = "verifier") -> str:
    """The loader node at the root of ``node_id``'s ``input_name`` (its class and plain settings, e.g.
    "CachedSearchLoadImageReward(ckpt_name=ImageReward.pt, dtype=fp32)"); "unknown" outside a server run."""
    node = (prompt or {}).get(str(node_id), {})
    link = node.get("inputs", {}).get(input_name)
    if not (isinstance(link, list) and len(link) == 2):
        return "unknown"
    loader = prompt.get(str(link[0]), {})
    settings = ", ".join(f"{name}={value}" for name, value in sorted(loader.get("inputs", {}).items())
                         if not isinstance(value, list))
    return f"{loader.get('class_type', 'unknown')}({settings})"


def cache_setup(patcher) -> tuple[int, int, float | None]:
    """The warmup and cooldown steps of the model's step cache and its tau (None: no adaptive cache of ours)."""
    config = step_cache_config(patcher)
    if config is None or config.mode is not CacheMode.ADAPTIVE:
        return 0, 0, None
    return config.warmup_steps, config.cooldown_steps, config.tau


def calibration_policy(store: ScoreStore, previews: dict[tuple[str, int, int], RolloutPreviews],
                       tau_arms: dict[float, str], prompts: int, seeds: list[int], steps: int,
                       setup: PolicySetup) -> dict | None:
    """Calibrate's tables for the chooser from its scored rollouts and recorded previews (None where a cached
    rollout has none: an in-process run records none)."""
    prompt_list = list(range(prompts))
    full = [list(zip(*rows)) for rows in zip(*(store.table(FULL_ARM, prompt_list, seeds, field).tolist()
                                               for field in ("score", "calls", "seconds")))]
    cached = {}
    for tau, arm in tau_arms.items():
        scores = store.table(arm, prompt_list, seeds).tolist()
        computed = (store.table(arm, prompt_list, seeds, "calls") - store.table(arm, prompt_list, seeds, "skipped"))
        cached[tau] = [[(score, int(calls), previews.get((arm, prompt, seed)))
                        for seed, score, calls in zip(seeds, score_row, computed_row)]
                       for prompt, (score_row, computed_row) in enumerate(zip(scores, computed.tolist()))]
    return policy_record(setup, steps, full, cached)


def calibrated_policy(hidden, rollouts, plan, steps: int, frames: int, warmup_steps: int, cooldown_steps: int
                      ) -> dict | None:
    """What a one-stage Calibrate remembers for Budget "auto" (``calibration_policy`` of its ``rollouts``, a
    ``calibration_rollouts.Rollouts``, on our cache's ``plan``), the verifier read from its prompt's graph."""
    setup = PolicySetup(verifier_identity(hidden.prompt, hidden.unique_id), frames, warmup_steps, cooldown_steps)
    return calibration_policy(rollouts.store, rollouts.recorded_previews, {tau: plan.arm(tau) for tau in plan.taus},
                              plan.prompts, plan.seed_list, steps, setup)
