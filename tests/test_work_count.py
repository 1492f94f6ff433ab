"""The work count on a toy transformer: every layer's calls against the calls asked, and the rules for layers that
take no part (core only, no ComfyUI)."""

import pytest
import torch

from cachedsearch_core.work_count import WorkCount, work_layers


class Attention(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.q, self.o = torch.nn.Linear(width, width), torch.nn.Linear(width, width)

    def forward(self, x):
        return self.o(self.q(x))


class Block(torch.nn.Module):
    def __init__(self, width, with_image=False):
        super().__init__()
        self.attn = Attention(width)
        self.ffn = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width))
        # Used only when an image embedding comes with the call (as Wan's image cross-attention).
        self.image = torch.nn.Linear(width, width) if with_image else None

    def forward(self, x, image=None):
        x = x + self.attn(x)
        if image is not None:
            x = x + self.image(image)
        return x + self.ffn(x)


class Toy(torch.nn.Module):
    """Two blocks, and an optional list (as VACE's) that runs only with its input."""

    def __init__(self, width=4):
        super().__init__()
        self.blocks = torch.nn.ModuleList([Block(width, with_image=True), Block(width, with_image=True)])
        self.extra_blocks = torch.nn.ModuleList([Block(width)])
        self.head = torch.nn.Linear(width, width)

    def forward(self, x, image=None, extra=False, skip_after_first=False, reuse_attention=None):
        for index, block in enumerate(self.blocks):
            if skip_after_first and index > 0:
                continue
            if reuse_attention is not None and index > 0:
                block.attn.forward = lambda _: reuse_attention  # replaced, as an attention cache would
                try:
                    x = block(x, image)
                finally:
                    del block.attn.forward
                continue
            x = block(x, image)
        if extra:
            x = self.extra_blocks[0](x)
        return self.head(x)


@pytest.fixture
def toy():
    torch.manual_seed(0)
    return Toy()


def run(toy, count, calls, **options):
    with count.counting(), torch.no_grad():
        for _ in range(calls):
            toy(torch.ones(1, 4), **options)


def test_every_linear_layer_of_every_block_is_counted_and_the_head_is_not(toy):
    names = [layer.name for layer, _ in work_layers(toy)]
    assert names == [f"{block}.{layer}" for block in ("blocks.0", "blocks.1", "extra_blocks.0")
                     for layer in ("attn.q", "attn.o", "ffn.0", "ffn.2", "image")][:-1]


def test_full_compute_has_no_shortfall_and_the_hooks_go_when_counting_ends(toy):
    count = WorkCount(toy)
    run(toy, count, 3, image=torch.ones(1, 4))
    assert count.take(asked=3).shortfall is None
    assert not any(module._forward_pre_hooks for module in toy.modules())
    with torch.no_grad():
        toy(torch.ones(1, 4))  # outside counting(): not counted, so this take saw no work at all
    assert count.take(asked=1).shortfall.layer == "every block"


def test_layers_that_take_no_part_are_not_asked(toy):
    """No image embedding: the image layers never ran inside blocks that did; no extra input: that list never ran."""
    count = WorkCount(toy)
    run(toy, count, 4)
    assert count.take(asked=4).shortfall is None


def test_a_first_block_cache_falls_short_at_the_blocks_it_reused(toy):
    count = WorkCount(toy)
    run(toy, count, 2)
    run(toy, count, 2, skip_after_first=True)
    shortfall = count.take(asked=4).shortfall
    assert (shortfall.layer, shortfall.computed, shortfall.asked) == ("blocks.1.attn.q", 2, 4)


def test_a_block_that_never_ran_in_a_list_that_did_computed_nothing(toy):
    count = WorkCount(toy)
    run(toy, count, 3, skip_after_first=True)
    shortfall = count.take(asked=3).shortfall
    assert (shortfall.layer, shortfall.computed) == ("blocks.1", 0)


def test_an_attention_cache_inside_a_block_that_runs_falls_short_at_its_projections(toy):
    count = WorkCount(toy)
    run(toy, count, 1)
    run(toy, count, 2, reuse_attention=torch.zeros(1, 4))
    shortfall = count.take(asked=3).shortfall
    assert shortfall.layer == "blocks.1.attn.q" and shortfall.computed == 1


def test_a_layer_run_with_its_forward_replaced_does_not_count_and_is_named(toy):
    """Its hooks still run, but its weights need not: that call is not counted for it."""
    count = WorkCount(toy)
    layer = toy.blocks[1].ffn[0]
    run(toy, count, 1)
    layer.forward = lambda x: x
    run(toy, count, 1)
    del layer.forward  # restored before the take, as a cache would between calls
    tally = count.take(asked=2)
    assert (tally.shortfall.layer, tally.shortfall.computed) == ("blocks.1.ffn.0", 1)
    assert tally.replaced_forwards == ("blocks.1.ffn.0",)
    assert count.take(asked=0).replaced_forwards == ()


def test_a_layer_replaced_on_every_call_is_short_not_taking_no_part(toy):
    count = WorkCount(toy)
    toy.blocks[1].ffn[0].forward = lambda x: x
    run(toy, count, 2)
    assert count.take(asked=2).shortfall.layer == "blocks.1.ffn.0"


def test_take_resets_the_counts(toy):
    count = WorkCount(toy)
    run(toy, count, 2)
    assert count.take(asked=2).shortfall is None
    run(toy, count, 1)
    assert count.take(asked=1).shortfall is None
    assert count.take(asked=1).shortfall.layer == "every block"


def test_a_linear_layer_that_is_no_torch_linear_is_counted():
    """ComfyUI 0.33 loads fp8 and other quantized checkpoints with a ``Linear`` that subclasses ``nn.Module``."""

    class Linear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.eye(4))

        def forward(self, x):
            return x @ self.weight

    holder = torch.nn.Module()
    holder.blocks = torch.nn.ModuleList([torch.nn.Sequential(Linear(), torch.nn.GELU())])
    assert [layer.name for layer, _ in work_layers(holder)] == ["blocks.0.0"]
