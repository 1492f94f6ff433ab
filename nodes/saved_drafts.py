"""A search's drafts saved in ComfyUI's user directory as they finish (``cachedsearch_core.draft_store``), so that a
re-queued search (after Cancel, an error or a restart), a wider one, or a pick after ComfyUI dropped the Sampler's
outputs computes only the drafts it lacks.

A draft's key is what determines it: the search node's inputs as the API prompt's graph builds them (the model with
its loaders, LoRAs and cache settings; the conditioning; the latent; the sampler settings; each node's left-out
inputs at their defaults), the content of its conditioning and latent, the ComfyUI and torch versions and the
device, and the seed. The seed range, the width, the preview VAE and the plans are not part of it: every seed keeps
its draft whatever search asks for it.
"""

from __future__ import annotations

import dataclasses
import logging
import os

import comfy.model_management
import folder_paths
import torch

from ..cachedsearch_core.draft_store import DraftStore
from ..cachedsearch_core.previews import X0_PREVIEW
from ..cachedsearch_core.records import Draft
from ..cachedsearch_core.saved_keys import draft_key, fingerprint
from .calibration_graph import root_model_file
from .packed_latent import packed, parts
from .prompt_graph import upstream, with_defaults
from .runner import CandidateState

logger = logging.getLogger(__name__)

# One folder for everything saved (drafts and Calibrate's rollouts share one store, ``saved_work``).
SAVED_FOLDER = os.path.join("cachedsearch", "saved")
# The search node's inputs that choose which seeds run, where and what is shown, not what a seed's draft is (the
# Sampler and the Distributed Sampler, whose other inputs are the same, share their drafts).
_NOT_IN_THE_KEY = ("seed", "num_candidates", "pruning", "budget", "preview_vae", "save_drafts", "worker_timeout")
# A search's model inputs: the one model, or a two-expert search's first (its drafts are listed under that file).
_MODEL_INPUTS = ("model", "model_high", "model_low")
SAVE_DRAFTS_TOOLTIP = (
    "Keep every finished draft on disk (ComfyUI's user folder, cachedsearch/saved, oldest first beyond the cap set "
    "in Settings > CachedSearch, 4 GB unless changed; cleared from the menu CachedSearch > Saved drafts): "
    "queueing the same search again after Cancel or a restart, or with more candidates, computes only the drafts "
    "it lacks, and a pick never drafts again. Off: nothing is saved or reused.")


def saved_folder() -> str:
    return os.path.join(folder_paths.get_user_directory(), SAVED_FOLDER)


def _runtime() -> str:
    """What else can change a sampled latent's bits: ComfyUI's and torch's versions and the device."""
    try:
        import comfyui_version
    except ImportError:
        comfyui = "unknown"
    else:
        comfyui = str(getattr(comfyui_version, "__version__", "unknown"))
    device = comfy.model_management.get_torch_device()
    return f"ComfyUI {comfyui}, torch {torch.__version__}, {comfy.model_management.get_torch_device_name(device)}"


@dataclasses.dataclass(frozen=True)
class SavedDrafts:
    """One search's view of the draft store: the store and its setup's fingerprint."""

    store: DraftStore
    setup: str
    # The model file the search drafts on (the loader at the root of its model input), by which the artist can clear
    # its drafts; None when the graph does not say.
    model: str | None = None
    # The drafts (seed, why) this search could not write (a full disk, a read-only folder): it delivers them anyway.
    not_kept: list[tuple[int, str]] = dataclasses.field(default_factory=list, compare=False)

    @classmethod
    def for_node(cls, hidden, save: bool, *contents, not_drafting: tuple[str, ...] = ()) -> SavedDrafts | None:
        """The saved drafts of the search node running now, keyed by its inputs in the server's prompt (but
        ``not_drafting``: entries of the node's own that say where its seeds run, not what they draft) and the
        ``contents`` it was given (its conditioning and latent); None when saving is off or outside a server run,
        whose prompt alone says how the model was built."""
        prompt, node_id = hidden.prompt, str(hidden.unique_id)
        if not save or not prompt or node_id not in prompt:
            return None
        inputs = prompt[node_id].get("inputs", {})
        graph = {name: with_defaults(upstream(prompt, value)) for name, value in inputs.items()
                 if name not in _NOT_IN_THE_KEY and name not in not_drafting}
        setup = fingerprint([graph, list(contents), _runtime()])
        model = next(filter(None, (root_model_file(prompt, node_id, name) for name in _MODEL_INPUTS)), None)
        try:
            return cls(DraftStore(saved_folder()), setup, model)
        except OSError as error:  # an index that could not be read nor moved aside: search without the store
            logger.warning("CachedSearch: saved drafts not used: %s", error)
            return None

    def key(self, seed: int) -> str:
        return draft_key(self.setup, seed)

    def holds(self, seeds) -> bool:
        """Whether every seed's draft is saved (none failed to be written, none evicted by the cap)."""
        return all(self.store.get(self.key(seed)) is not None for seed in seeds)

    def reused_state(self, seed: int, latent: dict) -> CandidateState | None:
        """The candidate as its saved draft finished, its latent read now; None when none is saved (or it did not
        read back)."""
        read = self._read(self.key(seed), latent)
        return None if read is None else read[0]

    def save(self, state: CandidateState) -> None:
        self.save_draft(state.draft, state.latent["samples"])

    def save_draft(self, draft: Draft, samples) -> None:
        """Saves the draft; a draft that could not be written (a full disk, a read-only folder) is reported, and
        the search goes on."""
        self._add(self.key(draft.seed), draft, samples)

    def round_key(self, seed: int, cuts) -> str:
        """The key of a pruned search's candidate after the steps cut at ``cuts`` (its round steps so far; a
        survivor's end adds the trajectory's step count): a cut changes the cache around it, so each list of cuts
        keys its own states, none a plain draft's."""
        return draft_key(fingerprint([self.setup, "pruned at", list(cuts)]), seed)

    def reused_round_state(self, seed: int, cuts, latent: dict) -> tuple[CandidateState, torch.Tensor | None] | None:
        """The candidate as an earlier pruned search saved it after ``cuts``, with its saved x0 estimate (None for a
        survivor's end); None when none is saved (or it did not read back)."""
        read = self._read(self.round_key(seed, cuts), latent)
        return None if read is None else (read[0], read[1].get(X0_PREVIEW.saved_tensor))

    def _read(self, key: str, latent: dict) -> tuple[CandidateState, dict] | None:
        """The state saved under ``key`` (its latent in ``latent``'s entries) and every tensor saved with it; None
        when none is saved (or it did not read back)."""
        saved = self.store.get(key)
        tensors = self.store.tensors(key) if saved is not None else None
        if tensors is None:
            return None
        samples = tensors["samples"]
        return CandidateState({**latent, "samples": packed(samples if isinstance(samples, tuple) else (samples,))},
                              dataclasses.replace(saved.draft, reused=True)), tensors

    def save_round_state(self, cuts, state: CandidateState, x0: torch.Tensor | None = None) -> None:
        """Saves a pruned search's candidate as it is after ``cuts`` (with its x0 estimate at a round's step)."""
        self._add(self.round_key(state.seed, cuts), state.draft, state.latent["samples"],
                  None if x0 is None else {X0_PREVIEW.saved_tensor: x0})

    def _add(self, key: str, draft: Draft, samples, extras=None) -> None:
        try:
            self.store.add(key, draft, parts(samples), extras, model=self.model)
        except OSError as error:
            logger.warning("CachedSearch: draft of seed %s not saved in %s: %s", draft.seed, self.store.folder, error)
            self.not_kept.append((draft.seed, error.strerror or str(error)))

    def not_kept_line(self) -> str | None:
        """One line for the panel when drafts could not be written; None when every one was."""
        if not self.not_kept:
            return None
        seeds = sorted({seed for seed, _ in self.not_kept})
        return (f"{len(seeds)} draft{'s' if len(seeds) > 1 else ''} not kept on disk ({self.not_kept[0][1]}, "
                f"{self.store.folder}): this search delivered them; the next run saves them once there is room")

    def notes(self) -> tuple[str, ...]:
        """What the report says of the store: what was found wrong in it, and the drafts not kept."""
        return (*self.store.problems, *filter(None, [self.not_kept_line()]))

    def announcement(self, reused: int, width: int) -> str:
        found = (f"{reused} of {width} drafts saved by an earlier run, reused ({width - reused} to compute)" if reused
                 else f"no draft saved by an earlier run: {width} to compute")
        return " ".join([found, *self.store.problems])
