"""Max and average pooling are captured as strided slices and maximums or
sums (no extern call) and match eager PyTorch, NaN included."""

import re

import pytest
import torch
import torch.nn.functional as F

import braze


class Pool(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, x):
        return F.max_pool2d(x, **self.options) * 2


@pytest.mark.parametrize("options", [
    dict(kernel_size=3, stride=2, padding=1),  # ResNet's stem
    dict(kernel_size=2),
    dict(kernel_size=(3, 2), stride=(1, 2), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
], ids=str)
def test_max_pool2d_matches_eager(options):
    model = Pool(**options)
    x = torch.randn(2, 3, 11, 9)
    x[0, 1, 4, 4] = float("nan")
    program = braze.compile(model, (x,))
    assert not program.exported.imported.externs, program.exported.imported.externs
    torch.testing.assert_close(program(x), model(x), rtol=0, atol=0, equal_nan=True)


class StemPool(torch.nn.Module):
    """ResNet's stem: a convolution (channels-last out) and a padded max-pool."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)

    def forward(self, x):
        return F.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)


def test_padded_max_pool_takes_a_loop_without_padding_tests():
    """With channels innermost, a window's padding tests do not change
    along the SIMD loop: the points inside H and W, where they are decided,
    take a loop without selects (gcc left the loop with them scalar;
    codegen/segments.py). NaN in a border window and in an inner
    one, and a channel of -inf."""
    model = StemPool().eval()
    x = torch.randn(2, 3, 12, 10)
    with torch.no_grad():
        model.conv.bias[7] = float("-inf")
    program = braze.compile(model, (x,))
    source = program.stats["source"].read_text()
    kernels = source[source.index('extern "C"'):]
    assert re.search(r"if \(i1 >= 1 && (i1 < \d+ && )?i2 >= 1", kernels), "no loop for the inside of H and W"
    x[0, :, 0, 0] = float("nan")
    x[1, :, 6, 5] = float("nan")
    with torch.no_grad():
        torch.testing.assert_close(program(x), model(x), rtol=1e-5, atol=1e-5, equal_nan=True)


class StridedOnePool(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return F.max_pool2d(self.conv(x), kernel_size=3, stride=1, padding=1) * 3


def test_a_pool_of_its_input_shape_does_not_write_over_its_input():
    """A stride-1 padded pool's result has its input's shape, and the input
    (a convolution's result) dies there: the executor must not give the
    result the input's buffer, since each point reads its neighbours
    (written over them, a NaN spread along the rows)."""
    model = StridedOnePool().eval()
    x = torch.randn(2, 8, 11, 9)
    x[1, 3, 5, 4] = float("nan")
    program = braze.compile(model, (x,))
    with torch.no_grad():
        expected = model(x)
    actual = program(x)
    assert torch.equal(actual.isnan(), expected.isnan())
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5, equal_nan=True)


def test_max_pool2d_dynamic_batch():
    model = Pool(kernel_size=3, stride=2, padding=1)
    program = braze.compile(model, (torch.randn(2, 4, 8, 8),),
                            dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=8)},))
    assert not program.exported.imported.externs
    for batch in (1, 5):
        x = torch.randn(batch, 4, 8, 8)
        torch.testing.assert_close(program(x), model(x), rtol=0, atol=0)


class PoolWithIndices(torch.nn.Module):
    def forward(self, x):
        values, indices = F.max_pool2d(x, 2, return_indices=True)
        return values, indices


def test_used_indices_stay_an_extern_call():
    x = torch.randn(1, 2, 4, 4)
    program = braze.compile(PoolWithIndices(), (x,))
    assert [call.op for call in program.exported.imported.externs] == ["aten.max_pool2d_with_indices.default"]
    for actual, expected in zip(program(x), PoolWithIndices()(x)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


class Transition(torch.nn.Module):
    """DenseNet's transition: batch norm, ReLU, a 1x1 convolution, then a
    2x2 average pool; and a padded 3x3 pool that does not count the padding."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(8)
        self.conv = torch.nn.Conv2d(8, 4, 1, bias=False)

    def forward(self, x):
        y = F.avg_pool2d(self.conv(torch.relu(self.norm(x))), 2)
        return y, F.avg_pool2d(y, 3, 2, 1, ceil_mode=True, count_include_pad=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_average_pools_are_captured_and_match_eager(dtype):
    model = Transition().eval().to(dtype)
    x = torch.randn(2, 8, 14, 10, dtype=dtype)
    program = braze.compile(model, (x,))
    assert not program.exported.imported.externs, program.exported.imported.externs
    with torch.no_grad():
        for actual, expected in zip(program(x), model(x)):
            tolerance = 1e-5 if dtype == torch.float32 else 1e-2
            torch.testing.assert_close(actual, expected, rtol=tolerance, atol=tolerance)
