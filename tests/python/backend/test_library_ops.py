"""Convolutions, inference batch norm and extern calls through the CPU
backend, against eager PyTorch."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import braze


def _check(model, *args, **kwargs):
    compiled = braze.compile(model, args, kwargs=kwargs or None)
    with torch.no_grad():
        expected = model(*args, **kwargs)
        actual = compiled(*args, **kwargs)
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
    return compiled


CONVOLUTIONS = {
    "conv1d": (nn.Conv1d(4, 6, 3, stride=2, padding=1), (2, 4, 17)),
    "conv2d_dilated": (nn.Conv2d(3, 8, 3, padding=2, dilation=2), (2, 3, 12, 12)),
    "conv2d_grouped": (nn.Conv2d(8, 12, 3, groups=4, bias=False), (1, 8, 9, 9)),
    "conv2d_depthwise": (nn.Conv2d(6, 6, 5, padding=2, groups=6), (2, 6, 10, 10)),
    "conv3d": (nn.Conv3d(2, 4, 3, stride=(1, 2, 2)), (1, 2, 6, 7, 7)),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, padding=1, output_padding=1), (2, 4, 5, 5)),
    "conv_transpose1d_grouped": (nn.ConvTranspose1d(4, 6, 4, stride=3, groups=2), (2, 4, 7)),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolutions(name):
    module, shape = CONVOLUTIONS[name]
    compiled = _check(module.eval(), torch.randn(shape))
    assert compiled.stats["convolutions"] == 1 and compiled.stats["externs"] == 0


class ConvBnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(8, affine=False)
        with torch.no_grad():  # statistics a trained model would have
            for bn in (self.bn, self.bn2):
                bn.running_mean.normal_(0, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.normal_(1, 0.2)
            self.bn.bias.normal_(0, 0.2)

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return F.relu(self.bn2(self.conv2(y)) + y)  # a residual


def test_batch_norm_fuses_with_the_activation_and_residual():
    compiled = _check(ConvBnRelu().eval(), torch.randn(2, 3, 10, 10))
    # Each normalization's multiply-add and what follows it is one kernel.
    assert compiled.stats["convolutions"] == 2 and compiled.stats["kernels"] == 2


def test_batch_norm_scales_are_computed_once():
    """Ten normalizations: their scales and shifts (parameters only) are
    computed when the program is built, never grouped into a combo with a
    kernel that runs on every call (which would run them on every call)."""
    stages = []
    for _ in range(10):
        stages += [nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()]
    model = nn.Sequential(*stages).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_var.uniform_(0.5, 2.0)
                module.weight.normal_(1, 0.2)
    compiled = _check(model, torch.randn(2, 4, 6, 6))
    # One kernel per normalization's epilogue, each its own launch.
    assert compiled.stats["kernels"] == 10 and compiled.stats["launches"] == 10


def _check_dynamic_batch(model, example: torch.Tensor):
    """One compile with a dynamic batch, checked at batches 1 and 5."""
    batch = torch.export.Dim("batch", min=1, max=16)
    compiled = braze.compile(model, (example,), dynamic_shapes=({0: batch},))
    for size in (1, 5):
        x = torch.randn(size, *example.shape[1:])
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-4, atol=1e-5)


def test_dynamic_batch_convolution():
    _check_dynamic_batch(ConvBnRelu().eval(), torch.randn(2, 3, 10, 10))


def _prepacked(compiled) -> list[bool]:
    """Per convolution step: whether it runs on a weight prepacked for oneDNN."""
    return [step.run.prepacked is not None for step in compiled.compiled.program.steps
            if type(step.run).__name__ == "_ConvolutionCall"]


@pytest.mark.parametrize("name", ["conv2d_dilated", "conv2d_grouped", "conv2d_depthwise", "conv3d",
                                  "conv_transpose2d"])
def test_prepacked_convolutions(name):
    """2-D channels-last float32 convolutions with static sizes run on a
    weight reordered once for oneDNN (strides, padding, dilation, groups,
    depthwise); 3-D and transposed ones through aten.convolution; all match
    eager. Building does not draw from the user's random numbers."""
    module, shape = CONVOLUTIONS[name]
    x = torch.randn(shape)
    torch.manual_seed(7)
    expected_draw = torch.randn(4)
    torch.manual_seed(7)
    compiled = braze.compile(module.eval(), (x,))
    assert torch.equal(torch.randn(4), expected_draw)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), rtol=1e-4, atol=1e-5)
    assert _prepacked(compiled) == [name.startswith("conv2d")]


@pytest.mark.parametrize("name", ["conv2d_dilated", "conv2d_grouped", "conv2d_depthwise"])
def test_prepacked_half_convolutions(name):
    """bf16 2-D convolutions run on a prepacked weight too, and match
    eager (within bf16's rounding: oneDNN may add in another order)."""
    module, shape = CONVOLUTIONS[name]
    module = copy.deepcopy(module).eval().to(torch.bfloat16)
    x = torch.randn(shape).to(torch.bfloat16)
    compiled = braze.compile(module, (x,))
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), module(x), rtol=2e-2, atol=2e-2)
    assert _prepacked(compiled) == [True]


def _prepacked_products(compiled) -> list[bool]:
    """Per matmul/addmm step: whether it runs on a weight prepacked for oneDNN."""
    return [step.run.prepacked is not None for step in compiled.compiled.program.steps
            if type(step.run).__name__ == "_ProductCall"]


class TwoProducts(nn.Module):
    """A linear with a bias (addmm) and a product with a constant matrix
    that is no linear's weight (matmul of a [K, N] parameter)."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 96)
        self.matrix = nn.Parameter(torch.randn(96, 48) / 10)

    def forward(self, x):
        return self.linear(x) @ self.matrix


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_prepacked_half_products(dtype):
    """Half products with a constant rhs and a static M run on the rhs
    reordered once for oneDNN (mkldnn._linear_pointwise) where its CPU
    kernels take the type (f16 needs AVX512-FP16 or AVX-NE-CONVERT: not on
    AMD Zen 4), and match eager; with a dynamic M, or where autograd
    records the call, the host op runs (the same numbers). float32
    products keep their BLAS call."""
    model = TwoProducts().eval().to(dtype)
    x = torch.randn(24, 64).to(dtype)
    options = {"epilogue_fusion": False}  # library products on every CPU
    compiled = braze.compile(model, (x,), options=options)
    supported = (torch.ops.mkldnn._is_mkldnn_bf16_supported() if dtype == torch.bfloat16
                 else torch.ops.mkldnn._is_mkldnn_fp16_supported())
    assert _prepacked_products(compiled) == [supported, supported]
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(compiled(x), want, rtol=2e-2, atol=2e-2)
    tracked = compiled(x.clone().requires_grad_())
    assert tracked.requires_grad
    torch.testing.assert_close(tracked.detach(), want, rtol=2e-2, atol=2e-2)
    batch = torch.export.Dim("batch", min=1, max=64)
    dynamic = braze.compile(model, (x,), dynamic_shapes=({0: batch},), options=options)
    assert _prepacked_products(dynamic) == [False, False]
    with torch.no_grad():
        torch.testing.assert_close(dynamic(x[:5]), model(x[:5]), rtol=2e-2, atol=2e-2)
    single = braze.compile(model.float(), (x.float(),), options=options)
    assert _prepacked_products(single) == [False, False]


def test_prepacked_convolution_static_sizes_only():
    """A dynamic batch keeps aten.convolution (the blocked layout depends on
    the input's size); a weight that is an argument too."""
    batch = torch.export.Dim("batch", min=1, max=16)
    model = ConvBnRelu().eval()
    dynamic = braze.compile(model, (torch.randn(2, 3, 10, 10),), dynamic_shapes=({0: batch},))
    assert _prepacked(dynamic) == [False, False]
    static = _check(model, torch.randn(2, 3, 10, 10))
    assert _prepacked(static) == [True, True]
    functional = braze.compile(WeightArgument(), (torch.randn(1, 3, 8, 8), torch.randn(4, 3, 3, 3)))
    assert _prepacked(functional) == [False]


class WeightArgument(nn.Module):
    def forward(self, x, weight):
        return F.conv2d(x, weight)


class Pooled(nn.Module):
    """A max pool (with indices: two results) braze runs as an extern call,
    between compiled kernels."""

    def forward(self, x):
        y, indices = F.max_pool2d(x.relu(), 2, return_indices=True)
        return y * 2 + 1, indices


def test_an_extern_call_between_kernels():
    compiled = _check(Pooled(), torch.randn(2, 3, 8, 8))
    assert compiled.stats["extern_ops"] == {"aten.max_pool2d_with_indices.default": 1}
    assert compiled.stats["kernels"] == 2
    assert 'braze.extern "aten.max_pool2d_with_indices.default"' in str(compiled.exported)


class Scans(nn.Module):
    """Extern calls (cumsum, index_put) next to lowered indexing (gather, x[:, i])."""

    def forward(self, x, ids):
        scattered = x.index_put((ids[0] % 4,), torch.ones(3, 6), accumulate=True)
        return torch.cumsum(x, 1, dtype=torch.float64), scattered, torch.gather(x, 1, ids), x[:, ids[0]]


def test_extern_calls_with_keywords_lists_and_dtypes():
    x, ids = torch.randn(4, 6), torch.randint(0, 6, (4, 3))
    compiled = _check(Scans(), x, ids)
    assert set(compiled.stats["extern_ops"]) == {"aten.cumsum.default", "aten.index_put.default"}
    assert compiled.stats["captured_ops"] >= 4


def test_an_out_of_range_index_is_an_error_not_a_wild_read():
    compiled = braze.compile(Scans(), (torch.randn(4, 6), torch.randint(0, 6, (4, 3))))
    with pytest.raises(braze.BrazeError, match="index -1 is out of range"):
        compiled(torch.randn(4, 6), torch.full((4, 3), 6))


class ConstantMask(nn.Module):
    """An extern call on constants only (a buffer indexed by a constant)
    runs once, when the program is built; a random one runs every call."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(12.0).reshape(3, 4))

    def forward(self, x):
        picked = self.table[torch.tensor([2, 0])]
        return x + picked, x + torch.rand_like(x)


def test_constant_extern_calls_run_once_random_ones_every_call():
    x = torch.zeros(2, 4)
    compiled = braze.compile(ConstantMask(), (x,))
    first, noise1 = compiled(x)
    second, noise2 = compiled(x)
    torch.testing.assert_close(first, ConstantMask().table[[2, 0]])
    torch.testing.assert_close(first, second)
    assert not torch.equal(noise1, noise2)
    assert set(compiled.stats["extern_ops"]) <= {"aten.rand_like.default", "aten.rand.default",
                                                 "aten.uniform.default"}


def test_training_dropout_runs_through_torch():
    class Dropping(nn.Module):
        def forward(self, x):
            return F.dropout(x, 0.5, training=True) * 1.0

    x = torch.ones(64, 64)
    compiled = braze.compile(Dropping(), (x,))
    first, second = compiled(x), compiled(x)
    assert not torch.equal(first, second)
    for out in (first, second):  # kept elements are scaled by 1 / (1 - p)
        assert set(out.unique().tolist()) <= {0.0, 2.0}
        assert 0.35 < (out == 0).float().mean().item() < 0.65


def test_none_inputs_and_outputs():
    class Optional(nn.Module):
        def forward(self, x, mask=None, bias=None):
            y = x * 2
            if mask is not None:
                y = y + mask
            return {"y": y, "none": None, "z": (y.sum(-1), None)}

    x = torch.randn(3, 4)
    compiled = braze.compile(Optional(), (x, None, None))
    out = compiled(x, None, None)
    assert out["none"] is None and out["z"][1] is None
    torch.testing.assert_close(out["y"], x * 2)
    with pytest.raises(braze.BrazeError, match="input #1 was None when the model was captured"):
        compiled(x, x, None)
    exported = braze.export(Optional(), (x, x))
    torch.testing.assert_close(exported(x, x)["y"], x * 2 + x)


@pytest.mark.parametrize("shape, groups", [((2, 6, 5, 5), 3), ((2, 8, 7), 2), ((2, 6, 4, 4), 1), ((2, 4, 3, 3), 4)])
def test_group_norm(shape, groups):
    model = nn.GroupNorm(groups, shape[1]).eval()
    with torch.no_grad():
        model.weight.normal_()
        model.bias.normal_()
    compiled = _check(model, torch.randn(shape))
    assert compiled.stats["externs"] == 0


def test_group_norm_dynamic_batch_and_bf16():
    _check_dynamic_batch(nn.GroupNorm(2, 4).eval(), torch.randn(3, 4, 6, 6))
    half = nn.GroupNorm(2, 4).to(torch.bfloat16).eval()
    x = torch.randn(2, 4, 6, 6, dtype=torch.bfloat16)
    with torch.no_grad():
        torch.testing.assert_close(braze.compile(half, (x,))(x), half(x))


@pytest.mark.parametrize("format_", ["channels_last", None])
def test_convolution_memory_format(format_):
    """Either memory format gives eager's result; the tuning pass writes
    one only where it measured a gain, and never on a dynamic shape."""
    from braze.passes.tune_convolutions import tune_convolutions

    model = ConvBnRelu().eval()
    x = torch.randn(2, 3, 10, 10)
    text = str(braze.export(model, (x,)))
    if format_:
        text = text.replace("groups 1 :", f'groups 1 memory_format "{format_}" :')
    exported = braze.export(model, (x,))
    compiled = braze.compile_mlir(text, parameters=exported.parameters,
                                  options={"tune_convolutions": False, "channels_last": False})
    assert str(compiled.module).count("memory_format") == (2 if format_ else 0)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x)[0], model(x), rtol=1e-4, atol=1e-5)
    batch = torch.export.Dim("batch", min=1, max=8)
    dynamic = braze.export(model, (x,), dynamic_shapes=({0: batch},))
    tune_convolutions(dynamic.module.mlir_module.operation)
    assert "memory_format" not in str(dynamic)
    # Timing draws its inputs from a generator of its own, not the user's.
    static = braze.export(model, (torch.randn(3, 3, 11, 11),))
    torch.manual_seed(3)
    expected_draw = torch.randn(4)
    torch.manual_seed(3)
    tune_convolutions(static.module.mlir_module.operation)
    assert torch.equal(torch.randn(4), expected_draw)


class Block(nn.Module):
    """A residual block with a depthwise conv and a squeeze-excitation
    mean: channels-last from conv to conv, a reduction in between."""

    def __init__(self):
        super().__init__()
        self.expand = nn.Conv2d(8, 16, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.project = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = torch.nn.functional.silu(self.bn(self.expand(x)))
        y = torch.nn.functional.silu(self.depthwise(y))
        y = y * y.mean((2, 3), keepdim=True).sigmoid()
        return self.project(y) + x


def test_channels_last_carries_activations_from_conv_to_conv():
    model = Block().eval()
    x = torch.randn(2, 8, 12, 12)
    # Its 1x1 convolutions stay convolutions (braze-convolution-gemms off).
    compiled = braze.compile(model, (x,), options={"convolution_gemms": False})
    text = str(compiled.module)
    assert text.count('memory_format "channels_last"') == 3
    # The pointwise kernels after the convolutions iterate in NHWC order.
    assert "braze.permute" in text and "domain [2, 12, 12, 16]" in text
    with torch.no_grad():
        want = model(x)
        torch.testing.assert_close(compiled(x), want, rtol=1e-4, atol=1e-5)
        # The same model without the pass: the same numbers.
        plain = braze.compile(model, (x,), options={"channels_last": False, "convolution_gemms": False})
        assert "braze.permute" not in str(plain.module)
        torch.testing.assert_close(plain(x), want, rtol=1e-4, atol=1e-5)
        # A channels-last input is read as it is.
        torch.testing.assert_close(compiled(x.contiguous(memory_format=torch.channels_last)), want,
                                   rtol=1e-4, atol=1e-5)


class SqueezeExcite(nn.Module):
    """MobileNetV3's block: 1x1 expand + BN + hardswish, depthwise + BN +
    ReLU, squeeze-excitation (1x1 convolutions on [N, C, 1, 1]), 1x1
    project + BN, residual."""

    def __init__(self, channels=8, hidden=24):
        super().__init__()
        self.expand = nn.Conv2d(channels, hidden, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(hidden)
        self.depthwise = nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False)
        self.bn2 = nn.BatchNorm2d(hidden)
        self.squeeze = nn.Conv2d(hidden, 8, 1)
        self.excite = nn.Conv2d(8, hidden, 1)
        self.project = nn.Conv2d(hidden, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)
        with torch.no_grad():  # statistics a trained model would have
            for bn in (self.bn1, self.bn2, self.bn3):
                bn.running_mean.normal_(0, 0.5)
                bn.running_var.uniform_(0.5, 2.0)
                bn.weight.normal_(1, 0.2)
                bn.bias.normal_(0, 0.2)

    def forward(self, x):
        y = F.hardswish(self.bn1(self.expand(x)))
        y = F.relu(self.bn2(self.depthwise(y)))
        scale = F.hardsigmoid(self.excite(F.relu(self.squeeze(y.mean((2, 3), keepdim=True)))))
        return self.bn3(self.project(y * scale)) + x


@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
def test_small_pointwise_convolutions_are_fused_gemms(dtype, tolerance):
    """braze-convolution-gemms: the block's four 1x1 convolutions are GEMMs
    whose epilogues take the batch norms, activations and the residual;
    only the depthwise one stays a convolution. Against eager, with an
    NCHW and a channels-last input, and against braze with the pass off."""
    model = SqueezeExcite().eval().to(dtype)
    x = torch.randn(2, 8, 10, 10).to(dtype)
    compiled = braze.compile(model, (x,))
    assert compiled.stats["convolutions"] == 1
    # bf16 GEMMs above the decode shapes stay the library's, with a kernel after.
    assert compiled.stats["fused_gemms"] + compiled.stats["gemms"] == 4
    assert compiled.stats["fused_gemms"] == (4 if dtype == torch.float32 else 2)
    plain = braze.compile(model, (x,), options={"convolution_gemms": False})
    assert plain.stats["convolutions"] == 5
    with torch.no_grad():
        want = model(x)
        for given in (x, x.contiguous(memory_format=torch.channels_last)):
            torch.testing.assert_close(compiled(given), want, rtol=tolerance, atol=tolerance)
        torch.testing.assert_close(plain(x), want, rtol=tolerance, atol=tolerance)


class TwoReaders(nn.Module):
    """A value that is returned and also read by the next kernel: one
    kernel computes both (x / 2 returned, x + 1 and its half for the
    concatenation), its first result in the buffer of its input."""

    def __init__(self):
        super().__init__()
        self.first = nn.Conv2d(4, 4, 1, bias=False)
        self.second = nn.Conv2d(4, 12, 1)

    def forward(self, x):
        x = self.first(x).clamp(-1, 1)
        x = F.relu(x * torch.sigmoid(x.mean((2, 3), keepdim=True)))
        half = x * 0.5
        x = x + 1.0
        x = torch.cat([x, x * 0.5], 1)[:, :4]
        return self.second(x), half


def test_two_results_of_a_kernel_never_share_an_input_buffer():
    """braze-plan-memory let the kernel's first result take its input's
    buffer; the executor then gave its second result the same buffer (its
    own choice did not count the planned one), and the returned x / 2 came
    back as x + 1. Found by random CNN graphs around
    braze-convolution-gemms, whose bf16 GEMM (a library call) made the
    input a fresh buffer."""
    torch.manual_seed(0)
    model = TwoReaders().eval().to(torch.bfloat16)
    x = torch.randn(2, 4, 5, 5).to(torch.bfloat16).contiguous(memory_format=torch.channels_last)
    compiled = braze.compile(model, (x,))
    with torch.no_grad():
        for got, want in zip(compiled(x), model(x)):
            torch.testing.assert_close(got, want, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("conv,shape", [(nn.Conv1d(6, 5, 1), (2, 6, 9)), (nn.Conv3d(4, 7, 1, bias=False), (1, 4, 3, 5, 6)),
                                         (nn.Conv2d(3, 8, 1, dilation=2), (2, 3, 4, 4))])
def test_pointwise_convolutions_of_any_rank_are_fused_gemms(conv, shape):
    """1-D and 3-D 1x1 convolutions too (channels to the end, then rows);
    a dilation does not matter to a 1x1 kernel."""
    compiled = _check(nn.Sequential(conv, nn.GELU()).eval(), torch.randn(shape))
    assert compiled.stats["convolutions"] == 0 and compiled.stats["fused_gemms"] == 1


def test_large_pointwise_convolutions_stay_the_librarys():
    """Above the CPU target's convolution_gemm_work (2^23 multiply-adds) the
    library's convolution was faster: 8 x 64 x 64 x 64 x 64 = 2^27."""
    model = nn.Sequential(nn.Conv2d(64, 64, 1), nn.ReLU()).eval()
    compiled = _check(model, torch.randn(8, 64, 64, 64))
    assert compiled.stats["convolutions"] == 1 and compiled.stats["fused_gemms"] == 0


class Attention(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, q, k, v, mask=None):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **self.options) * 2.0


@pytest.mark.parametrize("case", ["bool_mask", "float_mask", "causal", "scale", "gqa"])
def test_attention_is_one_library_op_matching_eager(case):
    """braze.export keeps scaled_dot_product_attention whole: one
    braze.attention (no score matrix written out), the multiply after it
    fused as usual; eager's numbers, at two sequence lengths of one compile."""
    q, k, v = (torch.randn(2, 4, 10, 16) for _ in range(3))
    mask = None
    options = {}
    if case == "bool_mask":
        mask = torch.rand(2, 1, 10, 10) > 0.3
        mask[..., 0] = True  # no row entirely masked
    elif case == "float_mask":
        mask = torch.randn(10, 10)
    elif case == "causal":
        options["is_causal"] = True
    elif case == "scale":
        options["scale"] = 0.3
    else:
        options["enable_gqa"] = True
        k, v = torch.randn(2, 2, 10, 16), torch.randn(2, 2, 10, 8)
    model = Attention(**options)
    args = (q, k, v) if mask is None else (q, k, v, mask)
    sequence = torch.export.Dim("sequence", min=2, max=64)
    shapes = [{2: sequence}, {2: sequence}, {2: sequence}]
    if mask is not None:
        shapes.append({mask.dim() - 2: sequence, mask.dim() - 1: sequence})
    compiled = braze.compile(model, args, dynamic_shapes=shapes)
    assert compiled.stats["attentions"] == 1 and compiled.stats["externs"] == 0
    assert "braze.bmm" not in str(compiled.module)
    for length in (10, 23):
        q2, k2, v2 = (torch.randn(*t.shape[:2], length, t.shape[3]) for t in (q, k, v))
        inputs = [q2, k2, v2]
        if mask is not None:
            m = torch.rand(*mask.shape[:-2], length, length) > 0.3 if mask.dtype == torch.bool \
                else torch.randn(length, length)
            if m.dtype == torch.bool:
                m[..., 0] = True
            inputs.append(m)
        with torch.no_grad():
            torch.testing.assert_close(compiled(*inputs), model(*inputs), rtol=1e-5, atol=1e-5)


def test_attention_with_dropout_runs_through_torch():
    """Dropout is training: the lowering refuses it, so it becomes an extern
    call, with a reason, and the graph still compiles."""
    class Dropout(nn.Module):
        def forward(self, q):
            return F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)

    q = torch.randn(2, 3, 5, 8)
    compiled = braze.compile(Dropout(), (q,))
    assert compiled.stats["attentions"] == 0 and compiled.stats["externs"] == 1
    assert compiled(q).shape == (2, 3, 5, 8)


@pytest.mark.parametrize("kv_heads", [4, 2, 1], ids=lambda h: f"kv_heads{h}")
def test_attention_under_torch_compile_is_one_library_op_in_inference(imported_graphs, kv_heads):
    """Under torch.compile without gradients, AOTAutograd's fused CPU
    attention becomes braze.attention (its logsumexp unused), not an extern
    call through torch, and with no fallback. That op has no `enable_gqa`:
    fewer key/value heads than query heads (transformers passes
    enable_gqa=True) are grouped heads."""
    model = Attention(enable_gqa=kv_heads != 4)
    q = torch.randn(2, 4, 10, 16)
    k, v = (torch.randn(2, kv_heads, 10, 16) for _ in range(2))
    mask = torch.randn(10, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a fallback to eager warns
        with torch.no_grad():
            got = torch.compile(model, backend="braze")(q, k, v, mask)
    (graph,) = imported_graphs
    assert not graph.externs, graph.externs
    assert "braze.attention" in str(graph.module)
    torch.testing.assert_close(got, model(q, k, v, mask), rtol=1e-5, atol=1e-5)


class Stem(nn.Module):
    """A CNN's stem: convolution, (batch norm,) ReLU, 3x3 max pool at
    stride 2 (SqueezeNet's without the norm, ResNet's with it and padding)."""

    def __init__(self, norm: bool):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.norm = nn.BatchNorm2d(8) if norm else nn.Identity()
        self.padding = int(norm)
        if norm:
            with torch.no_grad():
                self.norm.running_mean.normal_(0, 0.5)
                self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        return F.max_pool2d(F.relu(self.norm(self.conv(x))), 3, 2, self.padding)


@pytest.mark.parametrize("norm", [False, True], ids=["relu", "batch_norm_relu"])
@pytest.mark.parametrize("dtype,tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 2e-2)])
def test_a_stem_pools_in_channels_last_order_with_its_activation(norm, dtype, tolerance):
    """The activation after the convolution is computed inside the max pool
    that reads it at the nine points of its window (braze-inline-kernels),
    and the pool walks the convolution's channels-last result in NHWC order
    (braze-channels-last): one kernel, no permuted reads."""
    model = Stem(norm).eval().to(dtype)
    x = torch.randn(2, 3, 23, 23).to(dtype)
    compiled = braze.compile(model, (x,))
    assert compiled.stats["kernels"] == 1 and compiled.stats["convolutions"] == 1
    pooled = 6 if norm else 5
    assert f"domain [2, {pooled}, {pooled}, 8]" in str(compiled.module)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x), rtol=tolerance, atol=tolerance)
