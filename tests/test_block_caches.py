"""Caches that skip work inside the model, in front of every sampler: First-Block (every block after the first
reused), first-and-last-block (DBCache-style) and attention reuse (the block runs, a module inside it returns a
stored output). Each is a keyed DIFFUSION_MODEL wrapper CachedSearch does not know; a full-compute rollout behind it
is refused, naming the input to connect, and following that advice gives the stock graph bit for bit (in process,
CPU, tiny random-weight models of every family)."""

import contextlib

import pytest
import torch

from cachedsearch_core.work_count import block_lists, is_linear, work_layers

from report_text import refusal
from test_families import FAMILIES, graph_inputs

pytestmark = pytest.mark.slow  # in process, several seconds a test

STEPS = 6
SEED = 41
SETTINGS = dict(steps=STEPS, sampler_name="euler", scheduler="simple", denoise=1.0)


class _Stored(torch.nn.Module):
    """A block's place taken for one call: its output of the last computed call, nothing computed."""

    def __init__(self, output):
        super().__init__()
        self.output = output

    def forward(self, *args, **kwargs):
        return self.output


class ReusingCache:
    """A test-only step cache: every other transformer call reuses stored outputs instead of computing.

    ``first_block``: every block but the first (WaveSpeed's First-Block cache); ``first_and_last``: every block but
    the first and the last (DBCache); ``attention``: in every block, an attention module (or, where the family calls
    none as a module, the first called module with weights) returns its stored output while the rest of the block
    runs (attention broadcast).
    """

    def __init__(self, diffusion_model, kind: str):
        self.diffusion_model, self.kind, self.calls = diffusion_model, kind, 0
        self.blocks = [(blocks, index) for _, blocks in block_lists(diffusion_model) for index in range(len(blocks))]
        keep = {self.blocks[0]} | ({self.blocks[-1]} if kind == "first_and_last" else set())
        self.reused = [place for place in self.blocks if place not in keep] if kind != "attention" else []
        self.reuses_something = kind == "attention" or bool(self.reused)
        self.stored = {}
        self.attention = {}  # block place -> the module whose output is reused

    def __call__(self, executor, *args, **kwargs):
        reuse = self.calls % 2 == 1 and self.stored
        self.calls += 1
        if self.kind == "attention":
            return self._attention_call(executor, reuse, *args, **kwargs)
        with self._blocks_reused() if reuse else self._blocks_recorded():
            return executor(*args, **kwargs)

    @contextlib.contextmanager
    def _blocks_recorded(self):
        handles = [blocks[index].register_forward_hook(self._recorder((id(blocks), index)))
                   for blocks, index in self.reused]
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()

    @contextlib.contextmanager
    def _blocks_reused(self):
        originals = [(blocks, index, blocks[index]) for blocks, index in self.reused]
        for blocks, index, _ in originals:
            blocks[index] = _Stored(self.stored[(id(blocks), index)])
        try:
            yield
        finally:
            for blocks, index, original in originals:
                blocks[index] = original

    def _recorder(self, key):
        def record(_module, _args, output):
            self.stored[key] = output
        return record

    def _attention_call(self, executor, reuse, *args, **kwargs):
        if not self.attention:
            return self._find_attention(executor, *args, **kwargs)
        if not reuse:
            handles = [module.register_forward_hook(self._recorder(key)) for key, module in self.attention.items()]
            try:
                return executor(*args, **kwargs)
            finally:
                for handle in handles:
                    handle.remove()
        for key, module in self.attention.items():
            module.forward = (lambda output: lambda *a, **k: output)(self.stored[key])
        try:
            return executor(*args, **kwargs)
        finally:
            for module in self.attention.values():
                del module.forward

    def _find_attention(self, executor, *args, **kwargs):
        """The first call computes and notes which modules with weights run; in each block the outermost one named
        for attention is chosen (else the first that runs)."""
        called, handles, candidates = [], [], {}
        for blocks, index in self.blocks:
            named = [(name, module) for name, module in blocks[index].named_modules()
                     if module is not blocks[index] and any(True for _ in _linears(module))]
            candidates[(id(blocks), index)] = named
            for name, module in named:
                handles.append(module.register_forward_hook(self._first_call_recorder(called, module)))
        try:
            output = executor(*args, **kwargs)
        finally:
            for handle in handles:
                handle.remove()
        for named in candidates.values():
            ran = [(name, module) for name, module in named if module in called]
            if ran:
                _, module = next(((n, m) for n, m in ran if "attn" in n), ran[0])
                self.attention[id(module)] = module
        return output

    def _first_call_recorder(self, called, module):
        def record(_module, _args, output):
            called.append(module)
            self.stored[id(module)] = output
        return record


def _linears(module):
    return (child for child in module.modules() if is_linear(child))


KINDS = ("first_block", "first_and_last", "attention")


def with_cache(model, kind):
    """A clone of ``model`` behind the test cache ``kind``; skips the test when the tiny model has too few blocks
    for that cache to reuse any (LTX-Video's has one: nothing after the first)."""
    import comfy.patcher_extension

    cache = ReusingCache(model.model.diffusion_model, kind)
    if not cache.reuses_something:
        pytest.skip(f"{kind}: this tiny model has {len(cache.blocks)} block(s), none for that cache to reuse")
    cached = model.clone()
    cached.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, f"test_{kind}_cache", cache)
    return cached


def output(engine, node_id, **inputs):
    with torch.inference_mode():
        return engine.nodes[node_id].PREPARE_CLASS_CLONE({}).execute(**inputs)


def recommit(engine, candidates, **inputs):
    scores = " ".join(str(index) for index in range(len(candidates)))
    ranking = engine.one("CachedSearchRankingFromScores", candidates=candidates, scores=scores)
    return output(engine, "CachedSearchRecommit", candidates=candidates, ranking=ranking, mode="commit", **inputs)


def stock_samples(engine, model, positive, negative, latent, seed, cfg=5.0):
    """What a stock KSampler makes with ``seed`` on the test's settings."""
    return engine.one("KSampler", model=model, seed=seed, cfg=cfg, positive=positive, negative=negative,
                      latent_image=latent, **SETTINGS)["samples"]


@pytest.fixture(scope="module")
def wan(engine):
    """A tiny Wan 2.1 T2V four blocks deep (so every cache has blocks to reuse), shift 8, with the tiny graph's
    conditioning and latent."""
    import comfy.sd

    from scripts.tiny_models import wan21_state_dict

    _, positive, negative, latent = engine.tiny_wan_t2v()
    deep = comfy.sd.load_diffusion_model_state_dict(wan21_state_dict(num_layers=4))
    return engine.one("ModelSamplingSD3", model=deep, shift=8.0), positive, negative, latent


@pytest.mark.parametrize("kind", KINDS)
def test_the_cache_skips_work_inside_the_model_and_the_drafts_show_it(engine, wan, kind):
    model, positive, negative, latent = wan
    first_block_calls = []
    handle = block_lists(model.model.diffusion_model)[0][1][0].register_forward_pre_hook(
        lambda *_: first_block_calls.append(1))
    try:
        _, candidates, _ = output(engine, "CachedSearchSampler", model=with_cache(model, kind), positive=positive,
                                  negative=negative, latent_image=latent, seed=SEED, num_candidates=2, cfg=5.0,
                                  **SETTINGS).result
    finally:
        handle.remove()
    # Cond and uncond batched, one call a step: every other call reused, whatever block still ran.
    assert [(draft.calls_computed, draft.calls_skipped) for draft in candidates.drafts] == [(3, 3)] * 2
    # The first block computed every call: a count there (this extension's until now) would call it full compute.
    assert len(first_block_calls) == 2 * STEPS


@pytest.mark.parametrize("family_name", sorted(name for name in FAMILIES if "a14b" not in name))
@pytest.mark.parametrize("kind", KINDS)
def test_recommit_behind_the_cache_is_refused_and_the_plain_model_gives_the_stock_ksampler(engine, family_name,
                                                                                           kind):
    import comfy.supported_models

    spec = FAMILIES[family_name]
    if not hasattr(comfy.supported_models, spec.detected_as):
        pytest.skip(f"{spec.label}: this ComfyUI has no {spec.detected_as} model")
    model, positive, negative, latent = graph_inputs(engine, spec)
    layers = [layer for layer, _ in work_layers(model.model.diffusion_model)]
    # Every block's linear layers are found, whatever ops class the file format loads them with.
    assert layers and all(layer.name != layer.block for layer in layers)
    _, candidates, _ = output(engine, "CachedSearchSampler", model=with_cache(model, kind), positive=positive,
                              negative=negative, latent_image=latent, seed=SEED, num_candidates=1, cfg=spec.cfg,
                              **SETTINGS).result
    assert candidates.drafts[0].calls_skipped > 0  # so the commit cannot be free
    # the input, the cache's wrapper that skipped, and the input to connect the plain model to
    with pytest.raises(ValueError, match=refusal("model", f"test_{kind}_cache", "model")):
        recommit(engine, candidates)
    delivered, seed, _ = recommit(engine, candidates, model=model).result
    stock = stock_samples(engine, model, positive, negative, latent, seed, cfg=spec.cfg)
    assert torch.equal(delivered["samples"], stock)


@pytest.mark.parametrize("kind", ("first_block", "attention"))  # the tiny experts have two blocks
def test_two_experts_behind_the_cache_are_refused_naming_each_experts_input_and_following_it_is_exact(engine, wan,
                                                                                                     kind):
    from scripts.tiny_models import WAN22_A14B_FILES

    _, positive, negative, _ = wan
    latent = engine.one("EmptyHunyuanLatentVideo", width=32, height=32, length=5, batch_size=1)
    high, low = (engine.one("ModelSamplingSD3", shift=5.0, model=engine.one("UNETLoader", unet_name=name,
                                                                              weight_dtype="default"))
                 for name in WAN22_A14B_FILES["t2v"])
    experts = dict(steps=STEPS, split_step=3, cfg=3.5)
    _, candidates, _ = output(engine, "CachedSearchSamplerExperts", model_high=with_cache(high, kind),
                              model_low=with_cache(low, kind), positive=positive, negative=negative,
                              latent_image=latent, seed=SEED, num_candidates=1, sampler_name="euler",
                              scheduler="simple", **experts).result
    with pytest.raises(ValueError, match=refusal("model_high", "model_high")):
        recommit(engine, candidates)
    with pytest.raises(ValueError, match=refusal("model", 2, "model_high", "model_low")):  # 2 stages: their inputs
        recommit(engine, candidates, model=high)
    with pytest.raises(ValueError, match=refusal("model_low", "model_low")):
        recommit(engine, candidates, model_high=high)
    delivered, seed, _ = recommit(engine, candidates, model_high=high, model_low=low).result
    reference = engine.two_expert_graph(high, low, positive, negative, latent, seed, **experts)
    assert torch.equal(delivered["samples"], reference["samples"])


def test_a_one_model_search_refuses_the_experts_inputs(engine, wan):
    model, positive, negative, latent = wan
    _, candidates, _ = output(engine, "CachedSearchSampler", model=model, positive=positive, negative=negative,
                              latent_image=latent, seed=SEED, num_candidates=1, cfg=5.0, **SETTINGS).result
    with pytest.raises(ValueError, match=refusal("model_low", "model")):  # one model: connect that input
        recommit(engine, candidates, model_low=model)


@pytest.mark.parametrize("plan", ("pruning", "budget"))
def test_pruned_and_budget_searches_behind_the_cache_are_refused_and_following_the_advice_is_exact(engine, wan,
                                                                                                   plan):
    from test_full_compute import PLANS

    model, positive, negative, latent = wan
    _, candidates, _ = output(engine, "CachedSearchSampler", model=with_cache(model, "first_block"),
                              positive=positive, negative=negative, latent_image=latent, seed=SEED,
                              num_candidates=3, cfg=5.0, **{plan: PLANS[plan](engine)}, **SETTINGS).result
    with pytest.raises(ValueError, match=r"^model: this rollout must be full compute.*Recommit's model input"):
        recommit(engine, candidates)
    delivered, seed, _ = recommit(engine, candidates, model=model).result
    assert torch.equal(delivered["samples"], stock_samples(engine, model, positive, negative, latent, seed))


def test_calibrate_refuses_a_full_arm_behind_the_cache(engine, wan):
    from scripts.tiny_models import WAN21_VAE_FILE

    from test_full_compute import FrameRecorder

    model, positive, negative, latent = wan
    with pytest.raises(ValueError, match=r"^model: this rollout must be full compute.*test_first_block_cache.*"
                       r"Connect the model without that cache"):
        output(engine, "CachedSearchCalibrate", model=with_cache(model, "first_block"), positive=positive,
               negative=negative, latent_image=latent, vae=engine.one("VAELoader", vae_name=WAN21_VAE_FILE),
               verifier=FrameRecorder(), prompt="a red ball", first_seed=SEED, seeds=2, taus="0.5",
               capture_target=0.9, warmup_steps=1, cooldown_steps=1, frames_per_candidate=4, cfg=5.0, **SETTINGS)


def test_skip_layer_guidance_is_full_compute(engine, wan):
    """ComfyUI's Skip Layer Guidance asks for extra calls with some blocks replaced: those blocks are not asked
    of on those calls, so the commit is allowed and equals the stock KSampler with it."""
    model, positive, negative, latent = wan
    guided = engine.one("SkipLayerGuidanceDiT", model=model, double_layers="1", single_layers="", scale=3.0,
                        start_percent=0.0, end_percent=1.0, rescaling_scale=0.0)
    _, candidates, _ = output(engine, "CachedSearchSampler", model=guided, positive=positive, negative=negative,
                              latent_image=latent, seed=SEED, num_candidates=1, cfg=5.0, **SETTINGS).result
    assert candidates.drafts[0].calls_skipped == 0
    delivered, seed, _ = recommit(engine, candidates).result
    assert torch.equal(delivered["samples"], stock_samples(engine, guided, positive, negative, latent, seed))


@pytest.mark.parametrize("cached", (False, True), ids=("plain", "first_block"))
def test_under_torch_compile_the_commit_is_exact_or_refused_never_cached(engine, wan, cached):
    """Compiled (dynamo with the eager backend: the graph capture TorchCompileModel does, without minutes of
    inductor), the blocks' layers may run inside a captured graph the count cannot see: the commit is either the
    stock KSampler on the compiled model or refused naming torch.compile, never a cached video."""
    from comfy_api.torch_helpers import set_torch_compile_wrapper

    model, positive, negative, latent = wan
    compiled = model.clone()
    set_torch_compile_wrapper(compiled, backend="eager")
    search_model = with_cache(compiled, "first_block") if cached else compiled
    _, candidates, _ = output(engine, "CachedSearchSampler", model=search_model, positive=positive,
                              negative=negative, latent_image=latent, seed=SEED, num_candidates=1, cfg=5.0,
                              **SETTINGS).result
    stock = stock_samples(engine, model, positive, negative, latent, SEED)
    try:
        delivered, _, _ = recommit(engine, candidates).result
    except ValueError as refusal:
        # Counted through the captured graph, the cache itself is named; unseen, torch.compile is.
        named = "test_first_block_cache" if cached else "torch.compile"
        assert named in str(refusal) and "Recommit's model input" in str(refusal)
    else:
        assert not cached and torch.equal(delivered["samples"], stock)


def test_a_distributed_search_behind_the_cache_is_refused_and_following_the_advice_is_exact(engine, wan):
    """The master's own drafts (no workers here) behind a First-Block cache: its Recommit refuses, and with the
    plain model connected it delivers the stock KSampler."""
    model, positive, negative, latent = wan
    _, candidates, report, _ = output(engine, "CachedSearchDistributedSampler", model=with_cache(model, "first_block"),
                                      positive=positive, negative=negative, latent_image=latent, seed=SEED,
                                      num_candidates=2, worker_timeout=60.0, cfg=5.0, **SETTINGS).result
    assert "no workers" in report
    with pytest.raises(ValueError, match=r"^model: this rollout must be full compute.*Recommit's model input"):
        recommit(engine, candidates)
    delivered, seed, _ = recommit(engine, candidates, model=model).result
    assert torch.equal(delivered["samples"], stock_samples(engine, model, positive, negative, latent, seed))
