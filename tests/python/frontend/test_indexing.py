"""Advanced indexing (`aten.index.Tensor`) and `gather` are captured (no
extern call), match eager PyTorch, and an index out of range is a run-time
BrazeError."""

import pytest
import torch

import braze


def _close(actual, expected):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.shape, expected.shape)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def _compiled(model, args, dynamic_shapes=None):
    program = braze.compile(model, args, dynamic_shapes=dynamic_shapes)
    assert not program.exported.imported.externs, program.exported.imported.externs
    assert "braze.take" in str(program.module)
    return program


class Index(torch.nn.Module):
    def __init__(self, key):
        super().__init__()
        self.key = key

    def forward(self, x, i, j):
        return self.key(x, i, j) * 2


# Each: how the index tensors are used; None slots are `:`.
PATTERNS = {
    "broadcast pair": lambda x, i, j: x[i[:, None], j[None, :]],
    "after a slot": lambda x, i, j: x[:, i, j],
    "apart": lambda x, i, j: x[i, :, j],
    "last dim": lambda x, i, j: x[:, :, i],
    "middle": lambda x, i, j: x[:, i],
    "two-d index": lambda x, i, j: x[i[:, None] + 0 * j[None, :]],
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_index_matches_eager(pattern, dtype):
    model = Index(PATTERNS[pattern])
    x = torch.randn(5, 4, 6)
    # Negative indices count from the end, as in eager.
    i = torch.tensor([0, -1, 2, -4], dtype=dtype)
    j = torch.tensor([3, -2, 0, 1], dtype=dtype)
    program = _compiled(model, (x, i, j))
    _close(program(x, i, j), model(x, i, j))
    i2, j2 = torch.tensor([3, 1, -3, 0], dtype=dtype), torch.tensor([-1, 0, 2, 3], dtype=dtype)
    _close(program(x, i2, j2), model(x, i2, j2))


def test_index_dynamic_sizes():
    model = Index(lambda x, i, j: x[i[:, None], j[None, :]])
    seq = torch.export.Dim("seq", min=2, max=32)
    keys = torch.export.Dim("keys", min=2, max=32)
    program = _compiled(model, (torch.randn(3, 8), torch.tensor([0, 2, -1]), torch.arange(8)),
                        dynamic_shapes=({1: keys}, {0: seq}, {0: keys}))
    for rows, width in [(2, 5), (7, 17)]:
        x = torch.randn(3, width)
        i, j = torch.randint(-3, 3, (rows,)), torch.randint(-width, width, (width,))
        _close(program(x, i, j), model(x, i, j))


def test_transformers_padding_mask():
    """transformers' mask creation: `padding_mask[batch_idx, kv_idx]` with
    index tensors broadcast to (batch, heads, queries, keys)."""

    class Mask(torch.nn.Module):
        def forward(self, mask):
            batch = torch.arange(mask.shape[0])[:, None, None, None]
            kv = torch.arange(mask.shape[1])[None, None, None, :]
            return mask.bool()[batch, kv].expand(-1, -1, mask.shape[1], -1)

    model = Mask()
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[0, 4:] = 0
    program = _compiled(model, (mask,), dynamic_shapes=({1: torch.export.Dim("seq", min=2, max=64)},))
    for length in (6, 11):
        mask = (torch.rand(2, length) > 0.3).long()
        _close(program(mask), model(mask))


@pytest.mark.parametrize("bad", [5, -6])
def test_index_out_of_range_is_a_run_time_error(bad):
    model = Index(lambda x, i, j: x[i, j])
    x = torch.randn(5, 4)
    program = _compiled(model, (x, torch.tensor([0, 1]), torch.tensor([1, 2])))
    with pytest.raises(braze.BrazeError, match=r"braze.take.*index -1 is out of range"):
        program(x, torch.tensor([0, bad]), torch.tensor([1, 2]))
    # In range in the flattened dims but not in its own: still an error.
    with pytest.raises(braze.BrazeError, match=r"braze.take.*index -1 is out of range"):
        program(x, torch.tensor([0, 1]), torch.tensor([1, 4]))


@pytest.mark.parametrize("bad", [10, -1, 2**40])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_an_embedding_lookup_out_of_range_names_the_index(bad, dtype):
    """The CPU runtime looks rows up with torch's embedding, which checks
    the indices itself; its error still names the index and the range."""
    if dtype == torch.int32 and bad == 2**40:
        return
    model = torch.nn.Embedding(10, 4).eval()
    program = _compiled(model, (torch.tensor([[1, 2]], dtype=dtype),))
    with pytest.raises(braze.BrazeError, match=rf"braze.take.*index {bad} is out of range \[0, 10\) along dim 0"):
        program(torch.tensor([[1, bad]], dtype=dtype))
    ids = torch.tensor([[3, 9]], dtype=dtype)
    with torch.no_grad():
        _close(program(ids), model(ids))


class Gather(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x, index):
        return torch.gather(x, self.dim, index) + 1


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_matches_eager(dim):
    model = Gather(dim)
    x = torch.randn(4, 5, 6)
    size = x.shape[dim]
    # The index may be smaller than x in every dim.
    index = torch.randint(0, size, (3, 4, 5))
    program = _compiled(model, (x, index))
    _close(program(x, index), model(x, index))


def test_gather_token_type_ids_dynamic():
    """BERT/RoBERTa: an expanded buffer gathered at position ids."""

    class TokenTypes(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.arange(64).remainder(3)[None, :])

        def forward(self, positions):
            return torch.gather(self.table.expand(positions.shape[0], -1), 1, positions)

    model = TokenTypes()
    seq = torch.export.Dim("seq", min=2, max=64)
    program = _compiled(model, (torch.arange(8).repeat(2, 1),), dynamic_shapes=({1: seq},))
    for length in (5, 40):
        positions = torch.randint(0, 64, (2, length))
        _close(program(positions), model(positions))


def test_gather_out_of_range_is_a_run_time_error():
    model = Gather(1)
    x = torch.randn(3, 4)
    program = _compiled(model, (x, torch.zeros(3, 2, dtype=torch.int64)))
    # gather does not count negative indices from the end (eager raises too).
    for bad in (4, -1):
        index = torch.zeros(3, 2, dtype=torch.int64)
        index[1, 1] = bad
        with pytest.raises(RuntimeError, match="out of bounds"):
            model(x, index)
        with pytest.raises(braze.BrazeError, match=r"braze.take.*index -1 is out of range"):
            program(x, index)
