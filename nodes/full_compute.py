"""Full compute, checked: the step caches this extension knows, and a count of the transformer calls a sampling run
asked for against those it computed.

A rollout the extension calls full compute runs on ``full_compute_model`` (every known cache detached; wrappers it
does not know, such as context windows or LoRA hooks, stay: they change results legitimately) and is metered by a
``CallMeter``. The meter counts the calls asked at the outermost point (a PREDICT_NOISE and a DIFFUSION_MODEL wrapper
placed before every other) and the calls computed at the innermost one (the transformer's first block, which a call
any wrapper or patched forward skipped never reaches). Both are diffusion-model calls: ComfyUI may batch cond and
uncond into one call, and a cache that skips a whole model evaluation (LazyCache) skips as many calls as the
evaluations it let through made.
"""

from __future__ import annotations

import contextlib
import dataclasses

import comfy.patcher_extension
import torch

from ..cachedsearch_core import StageCalls
from .cache_patch import CONFIG_OPTION, WRAPPER_KEY

_WRAPPERS = comfy.patcher_extension.WrappersMP
METER_KEY = "cachedsearch_call_meter"


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
    CacheEngine("CachedSearch cache", ((_WRAPPERS.OUTER_SAMPLE, WRAPPER_KEY), (_WRAPPERS.DIFFUSION_MODEL, WRAPPER_KEY)),
                CONFIG_OPTION),
    CacheEngine("EasyCache", ((_WRAPPERS.OUTER_SAMPLE, "easycache"), (_WRAPPERS.CALC_COND_BATCH, "easycache"),
                              (_WRAPPERS.DIFFUSION_MODEL, "easycache")), "easycache"),
    CacheEngine("LazyCache", ((_WRAPPERS.OUTER_SAMPLE, "lazycache"), (_WRAPPERS.PREDICT_NOISE, "lazycache")),
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
    """The first block of the diffusion model's first block list (Wan ``blocks``, HunyuanVideo ``double_blocks``,
    LTX-Video ``transformer_blocks``): every computed transformer call runs it, a skipped one never does."""
    for name, child in model.model.diffusion_model.named_children():
        if isinstance(child, torch.nn.ModuleList) and "blocks" in name and len(child) > 0:
            return child[0]
    return None


class CallMeter:
    """The diffusion-model calls sampling runs asked for and computed, for ``attach``-ed models while ``counting``.

    ``on_computed_call()``, if given, runs before each computed call (a budget stops a draft there by raising).
    ``take()`` returns the calls since the last take.
    """

    def __init__(self, on_computed_call=None):
        self.on_computed_call = on_computed_call
        self.asked = self.computed = 0
        self._reached = 0  # calls that reached the outermost DIFFUSION_MODEL wrapper
        self._skipped_evaluations = 0
        self._calls_per_evaluation = 0  # of an evaluation nothing skipped whole

    def take(self) -> StageCalls:
        asked = self.asked + self._skipped_evaluations * max(self._calls_per_evaluation, 1)
        calls = StageCalls(computed=self.computed, skipped=max(asked - self.computed, 0))
        self.asked = self.computed = self._reached = self._skipped_evaluations = 0
        return calls

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
            # No block list to hook: count at the innermost DIFFUSION_MODEL wrapper, which sees every call a
            # wrapper let through but not one a patched forward skips.
            metered.add_wrapper_with_key(_WRAPPERS.DIFFUSION_MODEL, METER_KEY, self._innermost_call)
        return metered

    @contextlib.contextmanager
    def counting(self, model):
        """Count computed calls at ``model``'s first transformer block for the duration of the block; the hook is
        removed whatever ends it (the module is shared by every clone of the model)."""
        block = first_transformer_block(model)
        handle = block.register_forward_pre_hook(self._computed_call) if block is not None else None
        try:
            yield self
        finally:
            if handle is not None:
                handle.remove()

    def _computed_call(self, *_):
        if self.on_computed_call is not None:
            self.on_computed_call()
        self.computed += 1

    def _innermost_call(self, executor, *args, **kwargs):
        self._computed_call()
        return executor(*args, **kwargs)

    def _asked_call(self, executor, *args, **kwargs):
        self._reached += 1
        return executor(*args, **kwargs)

    def _evaluation(self, executor, *args, **kwargs):
        reached, computed = self._reached, self.computed
        output = executor(*args, **kwargs)
        # A cache that skipped a whole evaluation (above the diffusion model) let no call reach even the meter.
        calls = max(self._reached - reached, self.computed - computed)
        if calls == 0:
            self._skipped_evaluations += 1
        else:
            self.asked += calls
            self._calls_per_evaluation = max(self._calls_per_evaluation, calls)
        return output


def check_full_compute(calls: StageCalls, model, input_name: str, advice: str) -> None:
    """Raise when a rollout that must be full compute skipped calls, naming the input and the wrappers that may
    have skipped them."""
    if calls.skipped == 0:
        return
    suspects = unknown_wrappers(model)
    culprit = (f" a cache CachedSearch does not know skipped them (wrappers on this model: {', '.join(suspects)})"
               if suspects else " something on this model skipped them (a patched forward, such as a TeaCache)")
    raise ValueError(f"{input_name}: this rollout must be full compute but computed {calls.computed} of the "
                     f"{calls.computed + calls.skipped} transformer calls the sampler asked for;{culprit}. {advice}")
