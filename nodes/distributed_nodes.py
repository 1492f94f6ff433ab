"""CachedSearch Distributed Sampler: the search spread over ComfyUI-Distributed's workers
(``distributed_search``), or alone without them."""

from __future__ import annotations

import dataclasses

import torch
from comfy_api.latest import io

from ..cachedsearch_core import candidate_seeds
from ..cachedsearch_core.seed_slices import seed_slices, slice_of
from .distributed_search import DistributedCandidates, search_as_master, search_as_worker, server_inbox
from .distributed_setup import MASTER, NODE_ID, SETUP_INPUT, participant_label, setup_from_prompt
from .candidates import SearchCandidates, run_search
from .packed_latent import carries_sound
from .prompt_server import prompt_server
from .sampler_node import (
    SearchSamplerNode,
    ksampler_recipe,
    ksampler_search_inputs,
    ksampler_search_message,
    optional_search_inputs,
    sampler_schema,
    search_output,
    search_outputs,
)


class DistributedSearchSampler(SearchSamplerNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return sampler_schema(
            NODE_ID, "CachedSearch Distributed Sampler",
            "CachedSearch Sampler spread over ComfyUI-Distributed's workers: connect to_collector to a "
            "Distributed Collector and enable workers in its panel. Each participant drafts a fixed slice of the "
            "seeds; the master gathers all N (exact latents) and re-drafts the seeds of a worker that stops "
            "answering, so ranking and delivered video equal a single-machine search. Without workers it "
            "searches alone.",
            [
                *ksampler_search_inputs("Sampling steps per candidate."),
                *optional_search_inputs(single_machine=False),
                io.Float.Input("worker_timeout", default=60.0, min=1.0, max=3600.0, step=1.0,
                               tooltip="Seconds without a heartbeat or draft after which the master stops waiting "
                               "for a worker and drafts its remaining seeds itself. Workers send a heartbeat "
                               "every 2 s (a quarter of this if shorter) while drafting."),
            ],
            [
                *search_outputs(),
                io.Image.Output(display_name="to_collector",
                                tooltip="Connect to ComfyUI-Distributed's Distributed Collector and leave the "
                                "collector's outputs unconnected: the link is how its orchestrator finds this search "
                                "and sends it to your workers. The drafts reach the master as exact latents through "
                                "CachedSearch's own route, not as collector images (this output is an empty "
                                "placeholder)."),
            ],
            is_output_node=True,
        )

    @classmethod
    def validate_inputs(cls, seed=None, num_candidates=None, denoise=None):
        return ksampler_search_message(seed, num_candidates, denoise)

    @classmethod
    def execute(cls, model, positive, negative, latent_image, seed, num_candidates, steps, cfg, sampler_name,
                scheduler, denoise, worker_timeout, preview_vae=None, save_drafts=True) -> io.NodeOutput:
        if carries_sound(latent_image["samples"]):
            raise ValueError("latent_image: LTX-2's packed video + audio latent cannot be spread over machines yet "
                             "(a draft travels between them as one tensor); search it on one machine with "
                             "CachedSearch Sampler or CachedSearch Sampler (Advanced)")
        # The orchestration's entry (participants, job) changes with every distributed run: not part of a draft.
        announce, saved = cls.open_run(cls.validate_inputs(seed, num_candidates, denoise), latent_image,
                                       save_drafts, positive, negative, not_drafting=(SETUP_INPUT,))
        recipe = ksampler_recipe(model, positive, negative, latent_image, steps, cfg, sampler_name, scheduler,
                                 denoise)
        setup = setup_from_prompt(cls.hidden.prompt, cls.hidden.unique_id)
        if setup is None:
            candidates = _alone(recipe, candidate_seeds(seed, num_candidates), announce, saved)
        else:
            slices = seed_slices(seed, num_candidates, setup.participants)
            if setup.is_worker and not slice_of(slices, setup.participant):
                note = (f"{participant_label(setup.participant)}: no seeds to draft ({num_candidates} candidates, "
                        f"{len(slices)} participants); raise num_candidates or enable fewer workers")
                return io.NodeOutput(latent_image, None, note, torch.zeros(1, 1, 1, 3), ui={"text": (note,)})
            if setup.is_worker:
                candidates = search_as_worker(recipe, setup, slice_of(slices, setup.participant), worker_timeout,
                                              announce)
            else:
                candidates = search_as_master(recipe, setup, slices, worker_timeout, announce,
                                              server_inbox(prompt_server()), saved)
        output = search_output(candidates, preview_vae, announce)
        return io.NodeOutput(*output.result, torch.zeros(1, 1, 1, 3), ui=output.ui)


def _alone(recipe, seeds, announce, saved) -> DistributedCandidates:
    """A search queued without ComfyUI-Distributed's orchestration: every seed drafted here, said in a note."""
    alone = run_search(recipe, seeds, announce, saved)
    return DistributedCandidates(
        **{field.name: getattr(alone, field.name) for field in dataclasses.fields(SearchCandidates)
           if field.name != "notes"},
        drafted_by=(MASTER,) * len(alone),
        notes=(*alone.notes, "no workers: queued without ComfyUI-Distributed's orchestration (enable workers in its "
                             "panel)"))
