"""braze-plan-memory end to end: the executor carves kernel results from one
arena per call; numerics against eager, results never in the arena."""

import threading

import pytest
import torch

import braze
import braze.memory as memory


class Chain(torch.nn.Module):
    """Pointwise kernels between reductions (which end fusion groups), so
    the program has several intermediate buffers, some of them dying at a
    pointwise kernel that can overwrite them."""

    def forward(self, x):
        a = torch.softmax(x * 1.5, dim=-1)
        b = torch.nn.functional.layer_norm(a.exp() + x, (x.shape[-1],))
        c = torch.softmax(b - b.mean(dim=0, keepdim=True), dim=0)
        return (c.tanh() * 2).sum(dim=0), a.sum(dim=-1)


def _arena_allocated() -> int:
    return memory.default_allocator().stats()["allocated_bytes"]


@pytest.fixture(scope="module")
def chain():
    model, x = Chain(), torch.randn(64, 128)
    return model, x, braze.compile(model, (x,))


def test_planned_program_matches_eager_and_returns_no_arena_memory(chain):
    model, x, compiled = chain
    stats = compiled.stats
    assert stats["arena_bytes"] > 0
    assert stats["planned_peak_bytes"] >= stats["arena_bytes"]
    before = _arena_allocated()
    results = compiled(x)
    expected = model(x)
    for got, want in zip(results, expected):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    # The call's arena went back when the call ended: no result holds it.
    assert _arena_allocated() == before
    reserved = memory.default_allocator().stats()["raw_allocations"]
    compiled(x)
    # A second call takes its arena from the cache.
    assert memory.default_allocator().stats()["raw_allocations"] == reserved


def test_carved_results_and_in_place_updates_happen(chain):
    model, x, compiled = chain
    program = compiled.compiled.program
    carved = [call for call in (s.run for s in program.steps) if getattr(call, "carve", None)]
    assert carved, "no kernel result was carved from the arena"
    text = str(compiled.compiled.module)
    offsets = [line for line in text.splitlines() if "braze.offsets" in line]
    assert offsets and any("array<i64: -1>" in line for line in offsets)


def test_plan_off_gives_the_same_numbers(chain):
    model, x, compiled = chain
    unplanned = braze.compile(model, (x,), options={"plan_memory": False})
    for got, want in zip(unplanned(x), compiled(x)):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_concurrent_calls_each_take_their_own_arena(chain):
    model, _, compiled = chain
    inputs = [torch.randn(64, 128) for _ in range(4)]
    expected = [model(x) for x in inputs]
    failures = []

    def run(number):
        for _ in range(20):
            for got, want in zip(compiled(inputs[number]), expected[number]):
                if not torch.allclose(got, want, rtol=1e-5, atol=1e-5):
                    failures.append(number)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


def test_dynamic_sizes_fall_back_to_the_allocator():
    model = Chain()
    batch = torch.export.Dim("batch", min=2, max=64)
    compiled = braze.compile(model, (torch.randn(8, 128),), dynamic_shapes=({0: batch},))
    for size in (2, 17, 64):
        x = torch.randn(size, 128)
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class DecomposedAttention(torch.nn.Module):
    """Attention written out (scores, softmax, @ v) after a projection: the
    softmax writes over its dying score matrix."""

    def __init__(self, width=64, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(width, 3 * width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(c, dim=2))
        scores = torch.softmax(q @ k.transpose(-2, -1) / (c // self.heads) ** 0.5, dim=-1)
        return (scores @ v).transpose(1, 2).reshape(b, t, c)


@pytest.mark.parametrize("model,x", [(Chain(), torch.randn(64, 128)),
                                     (DecomposedAttention(), torch.randn(2, 128, 64))],
                         ids=["chain", "attention"])
def test_the_lower_peak_is_kept(model, x):
    auto = braze.compile(model, (x,))
    arena = braze.compile(model, (x,), options={"force_arena": True})
    auto_peak, arena_peak = auto.stats["planned_peak_bytes"], arena.stats["planned_peak_bytes"]
    assert auto_peak <= arena_peak
    if auto_peak < arena_peak:  # every buffer on the allocator
        assert auto.stats["arena_bytes"] == 0
    for compiled in (auto, arena):
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_softmax_writes_over_its_dying_score_matrix():
    """The spelled-out attention kept (braze-form-attention off, else the
    scores are never written out at all)."""
    model, x = DecomposedAttention(), torch.randn(2, 128, 64)
    compiled = braze.compile(model, (x,), options={"form_attention": False})
    text = str(compiled.compiled.module)
    softmax = [line for line in text.splitlines() if "braze.kernel" in line and "reduce [3]" in line]
    assert softmax and all("braze.reuse = array<i64: 0>" in line for line in softmax), softmax
    # The score matrix (2 x 4 x 128 x 128 floats) is held once, not twice.
    scores = 2 * 4 * 128 * 128 * 4
    assert compiled.stats["planned_peak_bytes"] < 2 * scores
    torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [128, 4], ids=["large", "small"])
def test_library_products_write_large_results_into_cached_blocks(rows):
    """A library GEMM writes (`out=`) a result of 128 KiB or more into a
    block of the caching allocator, whose pages stay mapped from call to
    call, and a smaller one into torch's memory; where autograd records the
    call (an input requiring grad, grad mode on) torch allocates, as `out=`
    records nothing. Every form matches eager."""
    linear = torch.nn.Linear(256, 512)
    x = torch.randn(rows, 256)
    compiled = braze.compile(linear, (x,), options={"epilogue_fusion": False})
    assert compiled.stats["gemms"] == 1 and compiled.stats["fused_gemms"] == 0
    before = _arena_allocated()
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, linear(x), rtol=1e-5, atol=1e-5)
    held = _arena_allocated() - before
    assert held == (rows * 512 * 4 if rows * 512 * 4 >= 128 * 1024 else 0)
    del out
    assert _arena_allocated() == before
    tracked = compiled(x.requires_grad_())
    torch.testing.assert_close(tracked, linear(x), rtol=1e-5, atol=1e-5)
