"""Random fused graphs against eager PyTorch: multi-output groups whose
outputs vary over different dims (a reduction, a value broadcast along the
reduced dim, the input normalized by the reduction), in 2-D and 3-D, with
keepdim or not, reducing one dim or several.

Each seed builds one module of many independent subgraphs, so one compile
checks them all.
"""

import random

import pytest
import torch

import braze

REDUCTIONS = {
    "sum": lambda t, dims, keep: t.sum(dims, keepdim=keep),
    "mean": lambda t, dims, keep: t.mean(dims, keepdim=keep),
    "amax": lambda t, dims, keep: t.amax(dims, keepdim=keep),
}
POINTWISE = {
    "scale": lambda a: a * 2.0,
    "exp": lambda a: torch.exp(a * 0.5),
    "relu": torch.relu,
    "tanh": torch.tanh,
}
COMBINE = {"add": torch.add, "mul": torch.mul, "sub": torch.sub}


def _subgraph(rng: random.Random, shape: tuple[int, ...]) -> dict:
    rank = len(shape)
    # The broadcast operand: size 1 in a random subset of dims, maybe of
    # lower rank (a bias), maybe expanded explicitly to the full shape.
    ones = {d for d in range(rank) if rng.random() < 0.5}
    operand = tuple(1 if d in ones else s for d, s in enumerate(shape))
    if rng.random() < 0.3 and operand[0] == 1:
        operand = operand[1:]
    dims = sorted(rng.sample(range(rank), rng.randint(1, rank - 1 if rank > 2 else 1)))
    return {
        "operand": operand,
        "expand": rng.random() < 0.5,
        "pointwise": rng.choice(list(POINTWISE)),
        "combine": rng.choice(list(COMBINE)),
        "reduce": rng.choice(list(REDUCTIONS)),
        "dims": dims,
        "keepdim": rng.random() < 0.5,
        "normalize": rng.random() < 0.5,
        "outputs": rng.sample(["m", "r", "m", "n"], rng.randint(1, 3)),
    }


class RandomGraphs(torch.nn.Module):
    def __init__(self, plans, shape):
        super().__init__()
        self.plans = plans
        self.shape = shape

    def forward(self, x, *operands):
        outputs = []
        for plan, b in zip(self.plans, operands):
            if plan["expand"]:
                b = b.expand(self.shape)
            m = POINTWISE[plan["pointwise"]](b)
            r = REDUCTIONS[plan["reduce"]](COMBINE[plan["combine"]](x, m), plan["dims"], plan["keepdim"])
            values = {"m": m, "r": r}
            if plan["normalize"] and plan["keepdim"]:
                values["n"] = x - r
            outputs.extend(values[name] for name in plan["outputs"] if name in values)
        return tuple(outputs)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 6)], ids=["2d", "3d"])
def test_random_multi_output_groups(seed, shape):
    rng = random.Random(seed * 100 + len(shape))
    plans = [_subgraph(rng, shape) for _ in range(10)]
    model = RandomGraphs(plans, shape)
    generator = torch.Generator().manual_seed(seed)
    args = (torch.randn(shape, generator=generator),
            *[torch.randn(plan["operand"], generator=generator) for plan in plans])
    compiled = braze.compile(model, args)
    expected = model(*args)
    actual = compiled(*args)
    assert len(actual) == len(expected)
    for number, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, msg=lambda m: f"output #{number}: {m}\n{plans}")


def _concat_plan(rng: random.Random, rank: int) -> dict:
    """A concat along a random dim of 2-3 pieces (an argument, a transposed
    argument, a constant filled in, or a concat of two arguments), read by a
    pointwise op and maybe a reduction."""
    pieces = []
    for _ in range(rng.randint(2, 3)):
        pieces.append({"size": rng.randint(1, 4),
                       "kind": rng.choice(["argument", "transposed", "constant", "nested"])})
    return {"dim": rng.randrange(rank), "pieces": pieces, "pointwise": rng.choice(list(POINTWISE)),
            "reduce": rng.choice([None, *REDUCTIONS]), "reduce_dim": rng.randrange(rank)}


def _piece_shapes(plan: dict, shape: tuple[int, ...]) -> list[tuple[int, ...]]:
    """The arguments a concat plan takes: one per piece (two for a nested
    one, splitting its size), a transposed piece's with its last two dims
    swapped; none for a constant."""
    shapes = []
    for piece in plan["pieces"]:
        sized = tuple(piece["size"] if d == plan["dim"] else s for d, s in enumerate(shape))
        if piece["kind"] == "transposed":
            shapes.append(sized[:-2] + (sized[-1], sized[-2]))
        elif piece["kind"] == "nested":
            first = piece["size"] // 2 or 1
            shapes += [tuple(first if d == plan["dim"] else s for d, s in enumerate(sized)),
                       tuple(piece["size"] - first if d == plan["dim"] else s for d, s in enumerate(sized))]
        elif piece["kind"] == "argument":
            shapes.append(sized)
    return [s for s in shapes if 0 not in s]


class RandomConcats(torch.nn.Module):
    def __init__(self, plans, shape):
        super().__init__()
        self.plans = plans
        self.shape = shape

    def forward(self, *arguments):
        arguments, outputs = list(arguments), []
        for plan in self.plans:
            dim, parts = plan["dim"], []
            for piece in plan["pieces"]:
                sized = tuple(piece["size"] if d == dim else s for d, s in enumerate(self.shape))
                if piece["kind"] == "constant":
                    parts.append(torch.full(sized, 0.25))
                elif piece["kind"] == "transposed":
                    parts.append(arguments.pop(0).transpose(-1, -2))
                elif piece["kind"] == "nested" and piece["size"] > 1:
                    parts.append(torch.cat((arguments.pop(0), arguments.pop(0)), dim))
                else:
                    parts.append(arguments.pop(0))
            y = POINTWISE[plan["pointwise"]](torch.cat(parts, dim))
            if plan["reduce"]:
                y = REDUCTIONS[plan["reduce"]](y, [plan["reduce_dim"]], False)
            outputs.append(y)
        return tuple(outputs)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 6)], ids=["2d", "3d"])
def test_random_concats_read_as_pieces(seed, shape):
    """Kernels read random concats' pieces (braze-fold-layouts): pieces of
    one to four elements along any dim, transposed views, filled constants
    and concats of concats, read pointwise and through reductions; no
    concat is left to run on the host."""
    rng = random.Random(seed * 100 + len(shape) + 7)
    plans = [_concat_plan(rng, len(shape)) for _ in range(8)]
    model = RandomConcats(plans, shape)
    generator = torch.Generator().manual_seed(seed)
    args = tuple(torch.randn(s, generator=generator) for plan in plans for s in _piece_shapes(plan, shape))
    compiled = braze.compile(model, args)
    assert "braze.concat" not in str(compiled.module)
    expected = model(*args)
    actual = compiled(*args)
    assert len(actual) == len(expected)
    for number, (a, e) in enumerate(zip(actual, expected)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, msg=lambda m: f"output #{number}: {m}\n{plans}")
