"""Where a transformer call does its work, counted: every linear layer inside the diffusion model's block lists.

A step cache can skip a transformer call in many places: the whole call (EasyCache, LazyCache), every block after
the first (First-Block caches), every block but the first and last (DBCache), or the attention inside a block that
still runs (attention broadcast). Only the layers that hold the weights tell them all apart from full compute, so a
full-compute check counts them: one integer increment per linear layer per call, no tensor touched.

Whether a count is short is judged per layer against the calls the sampler asked for:

- a layer list none of whose layers ran (a VACE list without VACE inputs) takes no part in this model's calls;
- a layer that never ran inside a block that did (Wan's image cross-attention without a CLIP vision input) is
  conditional and takes no part, unless it was called with its ``forward`` replaced;
- a block none of whose layers ran, in a list that did, computed nothing (a compiled or always-skipped block), and
- every other layer must have run at least once per asked call; a call that reached a layer whose ``forward``
  was replaced on the instance (its hooks run, its weights need not) does not count as run.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch


def block_lists(diffusion_model: torch.nn.Module) -> list[tuple[str, torch.nn.ModuleList]]:
    """The diffusion model's lists of transformer blocks, in order (Wan ``blocks``, HunyuanVideo ``double_blocks``
    and ``single_blocks``, LTX-Video ``transformer_blocks``, ...)."""
    return [(name, child) for name, child in diffusion_model.named_children()
            if isinstance(child, torch.nn.ModuleList) and "blocks" in name.lower() and len(child) > 0]


def is_linear(module: torch.nn.Module) -> bool:
    """A linear layer of any ops class: torch's, ComfyUI's casting ones, and those that are no ``nn.Linear`` at all
    (ComfyUI 0.33's mixed-precision ``Linear`` for fp8 and other quantized checkpoints)."""
    return isinstance(module, torch.nn.Linear) or type(module).__name__.endswith("Linear")


@dataclasses.dataclass(frozen=True)
class WorkLayer:
    """One counted layer: its path in the diffusion model, and the block and block list it belongs to."""

    name: str
    block: str
    block_list: str


def work_layers(diffusion_model: torch.nn.Module) -> list[tuple[WorkLayer, torch.nn.Module]]:
    """Every linear layer of every block (a block without one counts as a layer itself)."""
    layers = []
    for list_name, blocks in block_lists(diffusion_model):
        for index, block in enumerate(blocks):
            block_name = f"{list_name}.{index}"
            linears = [(f"{block_name}.{name}", module) for name, module in block.named_modules()
                       if is_linear(module)]
            for name, module in linears or [(block_name, block)]:
                layers.append((WorkLayer(name, block_name, list_name), module))
    return layers


@dataclasses.dataclass(frozen=True)
class Shortfall:
    """The layer that computed the fewest of the calls it was asked for."""

    layer: str
    computed: int
    asked: int

    def describe(self) -> str:
        return f"{self.layer} computed {self.computed} of {self.asked} calls"


@dataclasses.dataclass(frozen=True)
class WorkTally:
    """What one ``WorkCount.take`` found: the worst shortfall (None: none), and the counted layers that ran with
    their ``forward`` replaced on the instance (their hooks run, their weights may not)."""

    shortfall: Shortfall | None
    replaced_forwards: tuple[str, ...] = ()


class WorkCount:
    """Calls of each work layer of ``diffusion_model`` while ``counting()``; ``take(asked)`` judges and resets.

    The layers are shared by every clone of a model, so hooks live only inside ``counting()``.
    """

    def __init__(self, diffusion_model: torch.nn.Module):
        found = work_layers(diffusion_model)
        self.layers = [layer for layer, _ in found]
        self._modules = [module for _, module in found]
        self.counts = [0] * len(found)
        self._replaced: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.layers)

    @contextlib.contextmanager
    def counting(self):
        handles = [module.register_forward_pre_hook(self._counter(index, module)) for index, module in
                   enumerate(self._modules)]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def _counter(self, index: int, module: torch.nn.Module):
        counts, replaced, own = self.counts, self._replaced, vars(module)

        def count(*_):
            # A forward replaced on the instance still passes the hooks, but need not use the weights: not counted.
            if "forward" in own:
                replaced.add(index)
            else:
                counts[index] += 1

        return count

    def take(self, asked: int) -> WorkTally:
        """The worst shortfall against ``asked`` calls since the last take, by the rules in this module's docstring,
        and the layers seen with a replaced forward; resets both."""
        counts, self.counts[:] = list(self.counts), [0] * len(self.counts)
        replaced = set(self._replaced)
        self._replaced.clear()
        return WorkTally(self._shortfall(counts, asked, replaced),
                         tuple(self.layers[index].name for index in sorted(replaced)))

    def _shortfall(self, counts: list[int], asked: int, replaced: set[int]) -> Shortfall | None:
        if asked <= 0:
            return None
        ran_lists = {layer.block_list for layer, count in zip(self.layers, counts) if count}
        if not ran_lists:
            return Shortfall("every block", 0, asked)
        ran_blocks = {layer.block for layer, count in zip(self.layers, counts) if count}
        worst = None
        for index, (layer, count) in enumerate(zip(self.layers, counts)):
            taking_no_part = count == 0 and layer.block in ran_blocks and index not in replaced
            if layer.block_list not in ran_lists or taking_no_part:
                continue
            if count < asked and (worst is None or count < worst.computed):
                worst = Shortfall(layer.block if layer.block not in ran_blocks else layer.name, count, asked)
        return worst
