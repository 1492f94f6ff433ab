"""Full compute, checked: the step caches this extension knows, and a count of the transformer calls a sampling run
asked for against those it computed.

A rollout the extension calls full compute runs on ``full_compute_model`` (every known cache detached; wrappers it
does not know, such as context windows or LoRA hooks, stay: they change results legitimately) and is metered by a
``CallMeter``. The meter counts the calls asked at the outermost point (a PREDICT_NOISE and a DIFFUSION_MODEL wrapper
placed before every other) and the work done where the weights are used (every linear layer of every transformer
block, ``cachedsearch_core.work_count``), so a cache that skips the whole call, some blocks or the attention inside a
block that runs shows. Both are diffusion-model calls: ComfyUI may batch cond and uncond into one call, and a cache
that skips a whole model evaluation (LazyCache) skips the calls of the evaluation it reuses.
"""

from __future__ import annotations

import contextlib
import dataclasses

import comfy.patcher_extension
import torch

from ..cachedsearch_core import StageCalls
from ..cachedsearch_core.calibration import EASYCACHE, LAZYCACHE, OUR_ENGINE
from ..cachedsearch_core.work_count import Shortfall, WorkCount, block_lists
from .cache_patch import CONFIG_OPTION, WRAPPER_KEY, call_options

_WRAPPERS = comfy.patcher_extension.WrappersMP
METER_KEY = "cachedsearch_call_meter"
# Where ComfyUI's TorchCompileModel keeps its settings (comfy_api.torch_helpers, the same in 0.3.75 and 0.33.0).
TORCH_COMPILE_OPTION = "torch_compile_kwargs"


@dataclasses.dataclass(frozen=True)
class CacheEngine:
    """A step cache by the keys it registers: wrapper keys per wrapper type, and its transformer_options entry."""

    name: str
    wrapper_keys: tuple[tuple[str, str], ...]  # (wrapper type, key)
    option_key: str

    def attached_to(self, model) -> bool:
        return any(model.get_wrappers(wrapper_type, key) for wrapper_type, key in self.wrapper_keys)

    def detach(self, model) -> None:
        for wrapper_type, key in self.wrapper_keys:
            model.remove_wrappers_with_key(wrapper_type, key)
        model.model_options["transformer_options"].pop(self.option_key, None)

    def describe(self, model) -> str:
        """The engine and its threshold, as its node was set."""
        holder = model.model_options.get("transformer_options", {}).get(self.option_key)
        threshold = getattr(holder, "reuse_threshold", None)
        return self.name if threshold is None else f"{self.name} (reuse_threshold {threshold:g})"


# ComfyUI's EasyCache and LazyCache (comfy_extras/nodes_easycache.py, the same keys in 0.3.75 and 0.33.0) both keep
# their state under transformer_options["easycache"].
KNOWN_CACHE_ENGINES = (
    CacheEngine(OUR_ENGINE, ((_WRAPPERS.OUTER_SAMPLE, WRAPPER_KEY), (_WRAPPERS.DIFFUSION_MODEL, WRAPPER_KEY)),
                CONFIG_OPTION),
    CacheEngine(EASYCACHE, ((_WRAPPERS.OUTER_SAMPLE, "easycache"), (_WRAPPERS.CALC_COND_BATCH, "easycache"),
                            (_WRAPPERS.DIFFUSION_MODEL, "easycache")), "easycache"),
    CacheEngine(LAZYCACHE, ((_WRAPPERS.OUTER_SAMPLE, "lazycache"), (_WRAPPERS.PREDICT_NOISE, "lazycache")),
                "easycache"),
)
# Where a wrapper can skip a transformer call.
_SKIPPING_WRAPPER_TYPES = (_WRAPPERS.PREDICT_NOISE, _WRAPPERS.CALC_COND_BATCH, _WRAPPERS.APPLY_MODEL,
                           _WRAPPERS.DIFFUSION_MODEL)


def cache_engines_on(model) -> list[CacheEngine]:
    return [engine for engine in KNOWN_CACHE_ENGINES if engine.attached_to(model)]


def full_compute_model(model):
    """A clone of ``model`` with every known step cache detached; ``model`` itself is not modified."""
    patched = model.clone()
    patched.model_options.setdefault("transformer_options", {})
    for engine in cache_engines_on(model):
        engine.detach(patched)
    return patched


def unknown_wrappers(model) -> list[str]:
    """The wrappers on ``model`` that could skip a transformer call and belong to no known cache, as "type/key"."""
    known = {pair for engine in KNOWN_CACHE_ENGINES for pair in engine.wrapper_keys}
    options_wrappers = model.model_options.get("transformer_options", {}).get("wrappers", {})
    found = []
    for wrapper_type in _SKIPPING_WRAPPER_TYPES:
        for key in (*model.wrappers.get(wrapper_type, {}), *options_wrappers.get(wrapper_type, {})):
            label = f"{wrapper_type}/{key}"
            if key != METER_KEY and (wrapper_type, key) not in known and label not in found:
                found.append(label)
    return found


def first_transformer_block(model) -> torch.nn.Module | None:
    """The first block of the diffusion model's first block list: every computed transformer call runs it."""
    lists = block_lists(model.model.diffusion_model)
    return lists[0][1][0] if lists else None


@dataclasses.dataclass
class MeteredRun:
    """What ``CallMeter.take`` found of one sampling run: its calls, and where the work fell short."""

    calls: StageCalls
    shortfall: Shortfall | None = None
    replaced_forwards: tuple[str, ...] = ()
    compiled: bool = False


class CallMeter:
    """The diffusion-model calls sampling runs asked for and computed, for ``attach``-ed models while ``counting``.

    Asked: every call that reaches the outermost DIFFUSION_MODEL wrapper, plus, for an evaluation a cache skipped
    whole above the model (LazyCache), the calls the evaluation before it made (it is reused in its place).
    Computed: the calls every work layer of every block ran (``WorkCount``), so a cache that skips blocks or the
    attention inside them shows. Calls on which the sampler itself replaced blocks (Skip Layer Guidance's
    ``patches_replace``) are not asked of the replaced blocks' layers.

    ``on_computed_call()``, if given, runs before each call reaches the first transformer block (a budget stops a
    draft there by raising). ``take()`` returns the run since the last take and starts afresh.
    """

    def __init__(self, on_computed_call=None):
        self.on_computed_call = on_computed_call
        self._work: WorkCount | None = None
        self._work_of = None
        self._compiled = False
        self._reset()

    def _reset(self):
        self._reached = self._plain = self._innermost = 0
        self._skipped_evaluation_calls = 0
        self._last_evaluation_calls = 0

    def take(self) -> MeteredRun:
        asked = self._reached + self._skipped_evaluation_calls
        if self._work:
            tally = self._work.take(self._plain)
            shortfall, replaced = tally.shortfall, tally.replaced_forwards
        else:
            shortfall = Shortfall("the diffusion model", self._innermost, self._reached) \
                if self._innermost < self._reached else None
            replaced = ()
        short = self._plain - shortfall.computed if shortfall is not None else 0
        skipped = min(self._skipped_evaluation_calls + max(short, 0), asked)
        self._reset()
        return MeteredRun(StageCalls(computed=asked - skipped, skipped=skipped), shortfall, replaced,
                          compiled=self._compiled)

    def attach(self, model):
        """A clone of ``model`` whose outermost PREDICT_NOISE and DIFFUSION_MODEL wrappers are this meter's: they
        go in the model options' wrappers, which ComfyUI runs before the patcher's own."""
        metered = model.clone()
        wrappers = metered.model_options.setdefault("transformer_options", {}).setdefault("wrappers", {})
        for wrapper_type, wrapper in ((_WRAPPERS.PREDICT_NOISE, self._evaluation),
                                      (_WRAPPERS.DIFFUSION_MODEL, self._asked_call)):
            others = {key: value for key, value in wrappers.get(wrapper_type, {}).items() if key != METER_KEY}
            wrappers[wrapper_type] = {METER_KEY: [wrapper], **others}
        if first_transformer_block(model) is None:
            # No block list to count: count at the innermost DIFFUSION_MODEL wrapper, which sees every call a
            # wrapper let through but not one a patched forward skips.
            metered.add_wrapper_with_key(_WRAPPERS.DIFFUSION_MODEL, METER_KEY, self._innermost_call)
        return metered

    @contextlib.contextmanager
    def counting(self, model):
        """Count the work of ``model``'s blocks for the duration of the block; every hook is removed whatever ends
        it (the modules are shared by every clone of the model)."""
        diffusion_model = model.model.diffusion_model
        if self._work is None or self._work_of is not diffusion_model:
            self._work, self._work_of = WorkCount(diffusion_model), diffusion_model
        self._compiled = TORCH_COMPILE_OPTION in model.model_options
        block = first_transformer_block(model)
        handle = block.register_forward_pre_hook(self._before_computed_call) \
            if block is not None and self.on_computed_call is not None else None
        try:
            with self._work.counting():
                yield self
        finally:
            if handle is not None:
                handle.remove()

    def _before_computed_call(self, *_):
        self.on_computed_call()

    def _innermost_call(self, executor, *args, **kwargs):
        if self.on_computed_call is not None:
            self.on_computed_call()
        self._innermost += 1
        return executor(*args, **kwargs)

    def _asked_call(self, executor, *args, **kwargs):
        self._reached += 1
        options = call_options(args, kwargs, "cond_or_uncond") or {}
        if not options.get("patches_replace", {}).get("dit"):
            self._plain += 1
        return executor(*args, **kwargs)

    def _evaluation(self, executor, *args, **kwargs):
        reached = self._reached
        output = executor(*args, **kwargs)
        calls = self._reached - reached
        if calls:
            self._last_evaluation_calls = calls
        else:
            # A cache above the model reused an earlier evaluation in place of this one: the calls it skipped are
            # the calls of the evaluation it reused (the same conds, batched alike).
            self._skipped_evaluation_calls += max(self._last_evaluation_calls, 1)
        return output


def check_full_compute(run: MeteredRun, model, input_name: str, advice: str) -> None:
    """Raise when a rollout that must be full compute skipped work, naming the input, where the work fell short and
    what may have skipped it."""
    if run.calls.skipped == 0:
        return
    asked = run.calls.calls
    where = f" ({run.shortfall.describe()})" if run.shortfall is not None else ""
    found = f"computed {run.calls.computed} of the {asked} transformer calls the sampler asked for{where}"
    if run.replaced_forwards:
        found += f", and layers ran with their forward replaced ({', '.join(run.replaced_forwards[:3])})"
    suspects = unknown_wrappers(model)
    if run.compiled and (run.shortfall is None or run.shortfall.computed == 0):
        culprit = (" the diffusion model runs under torch.compile (TorchCompileModel), whose compiled blocks "
                   "CachedSearch cannot count, so it cannot vouch for full compute")
    elif suspects:
        culprit = f" a cache CachedSearch does not know skipped them (wrappers on this model: {', '.join(suspects)})"
    else:
        culprit = (" something on this model skipped them (a patched forward: a TeaCache, a First-Block cache or "
                   "an attention cache)")
    raise ValueError(f"{input_name}: this rollout must be full compute but {found};{culprit}. {advice}")
