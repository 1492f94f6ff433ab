"""The search's progress bar leaves ComfyUI's progress hook as it found it: after a search, after a search that
fails or is cancelled, and for a bar made on another thread while a search runs (in process, CPU)."""

import threading

import pytest
import torch

from scripts.tiny_models import WAN21_T2V_FILE

SETTINGS = dict(steps=4, cfg=5.0, sampler_name="euler", scheduler="simple", denoise=1.0)
CANDIDATES = 2


@pytest.fixture(scope="module")
def inputs(engine):
    model = engine.one("UNETLoader", unet_name=WAN21_T2V_FILE, weight_dtype="default")
    positive = engine.one("CachedSearchTestConditioning", text_seed=1, tokens=8, pooled=False)
    negative = engine.one("CachedSearchTestConditioning", text_seed=2, tokens=8, pooled=False)
    latent = engine.one("EmptyHunyuanLatentVideo", width=64, height=64, length=9, batch_size=1)
    return model, positive, negative, latent


class ComfyHook:
    """Stands for the hook ComfyUI's server installs (main.hijack_progress): it records what reaches it and can be
    told to raise, as the server's does when Cancel is pressed."""

    def __init__(self):
        self.seen = []
        self.raise_at = None  # (value, exception)

    def __call__(self, value, total, preview, node_id=None, **_):
        self.seen.append((value, total))
        if self.raise_at is not None and value >= self.raise_at[0]:
            raise self.raise_at[1]


@pytest.fixture
def comfy_hook():
    import comfy.utils

    hook = ComfyHook()
    comfy.utils.set_progress_bar_global_hook(hook)
    try:
        yield hook
    finally:
        comfy.utils.set_progress_bar_global_hook(None)


def search(engine, inputs, seed):
    model, positive, negative, latent = inputs
    return engine.run("CachedSearchSampler", model=model, positive=positive, negative=negative, latent_image=latent,
                      seed=seed, num_candidates=CANDIDATES, **SETTINGS)


def stock_ksampler_bar(engine, inputs, hook):
    """What a stock KSampler after the searches reports to ComfyUI's hook: its own steps, on its own bar."""
    model, positive, negative, latent = inputs
    hook.seen.clear()
    engine.one("KSampler", model=model, positive=positive, negative=negative, latent_image=latent, seed=0, **SETTINGS)
    return hook.seen[-1]


def test_searches_back_to_back_with_a_failing_and_a_cancelled_one_between_leave_comfyuis_hook(
        engine, inputs, comfy_hook):
    import comfy.model_management
    import comfy.utils

    search(engine, inputs, seed=1)
    assert comfy.utils.PROGRESS_BAR_HOOK is comfy_hook
    assert comfy_hook.seen[-1] == (CANDIDATES * SETTINGS["steps"],) * 2  # the search's one bar, filled

    comfy_hook.raise_at = (SETTINGS["steps"] + 2, comfy.model_management.InterruptProcessingException())
    with pytest.raises(comfy.model_management.InterruptProcessingException):
        search(engine, inputs, seed=2)  # cancelled inside the second draft's sampling call
    assert comfy.utils.PROGRESS_BAR_HOOK is comfy_hook

    comfy_hook.raise_at = (2, RuntimeError("a node inside the call failed"))
    with pytest.raises(RuntimeError, match="a node inside the call failed"):
        search(engine, inputs, seed=3)
    assert comfy.utils.PROGRESS_BAR_HOOK is comfy_hook

    comfy_hook.raise_at = None
    comfy_hook.seen.clear()
    drafts, _, _ = search(engine, inputs, seed=1)
    assert comfy.utils.PROGRESS_BAR_HOOK is comfy_hook
    assert {total for _, total in comfy_hook.seen} == {CANDIDATES * SETTINGS["steps"]}
    assert drafts["samples"].shape[0] == CANDIDATES
    assert stock_ksampler_bar(engine, inputs, comfy_hook) == (SETTINGS["steps"], SETTINGS["steps"])


def test_a_bar_on_another_thread_reaches_comfyuis_hook_unchanged_while_a_search_runs(engine, inputs, comfy_hook):
    import comfy.patcher_extension
    import comfy.utils

    other_thread_seen = []

    def other_thread_bar():
        bar = comfy.utils.ProgressBar(7)
        before = len(comfy_hook.seen)
        bar.update_absolute(3)
        other_thread_seen.extend(comfy_hook.seen[before:])

    def start_another_threads_bar(executor, *args, **kwargs):
        if not other_thread_seen:
            thread = threading.Thread(target=other_thread_bar)
            thread.start()
            thread.join()
        return executor(*args, **kwargs)

    model, positive, negative, latent = inputs
    watched = model.clone()
    watched.add_wrapper_with_key(comfy.patcher_extension.WrappersMP.DIFFUSION_MODEL, "test_other_thread",
                                 start_another_threads_bar)
    with torch.inference_mode():
        search(engine, (watched, positive, negative, latent), seed=1)
    assert other_thread_seen == [(3, 7)]  # its own value and total, not moved onto the search's bar
    assert comfy.utils.PROGRESS_BAR_HOOK is comfy_hook
