"""`braze-tune-convolutions`: picks the memory format each convolution runs
in, by measuring both on this machine.

oneDNN's speed depends on the layout: on some shapes channels-last (NHWC)
is twice as fast as the contiguous NCHW layout PyTorch uses by default, on
others (large channel counts at small spatial sizes) slower. For each
convolution whose sizes are all static, the pass times the library call as
the executor would make it, both ways, conversions of the input and the
result included (a parameter's weight is converted once, when the program is
built; a weight that is an argument, as under torch.compile, on every call),
and writes `memory_format = "channels_last"` where that wins by `margin`.
Results are remembered per shape for the process.
"""

from __future__ import annotations

import time

from mlir import ir

from braze.passes.registry import register_pass

_chosen: dict[tuple, bool] = {}


def _fastest_seconds(run, repeats: int) -> float:
    """The fastest of `repeats` calls: other load on the machine only ever
    adds time, so the minimum is the steadiest estimate of the call itself."""
    run()  # warm-up: oneDNN builds its primitive on the first call
    fastest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        fastest = min(fastest, time.perf_counter() - start)
    return fastest


def _static_shape(value: ir.Value) -> list[int] | None:
    shaped = ir.RankedTensorType(value.type)
    if any(shaped.is_dynamic_dim(d) for d in range(shaped.rank)):
        return None
    return list(shaped.shape)


def _is_weight(value: ir.Value) -> bool:
    """A parameter or constant, which the executor converts once; under
    torch.compile weights are arguments, converted on every call."""
    owner = value.owner
    return not isinstance(owner, ir.Block) and owner.name in ("braze.parameter", "braze.constant")


def _channels_last_wins(op, margin: float, repeats: int) -> bool | None:
    import torch

    from braze.hostops.dtypes import torch_dtype
    from braze.hostops.products import convolution_arguments, convolution_layout
    from braze.hostops.record import op_record

    operands = list(op.operation.operands)
    shapes = [_static_shape(v) for v in operands]
    if any(shape is None for shape in shapes) or len(shapes[0]) not in (4, 5):
        return None
    dtype = torch_dtype(ir.RankedTensorType(operands[0].type).element_type)
    arguments = convolution_arguments(op_record(op))
    key = (tuple(map(tuple, shapes)), dtype, str(arguments), _is_weight(operands[1]))
    if key not in _chosen:
        numbers = torch.Generator().manual_seed(0)  # not the user's random state
        x, w, *bias = [torch.randn(shape, dtype=dtype, generator=numbers) for shape in shapes]
        bias = bias[0] if bias else None
        layout = convolution_layout(op_record(op))
        w_last = w.contiguous(memory_format=layout)
        constant_weight = _is_weight(operands[1])

        def contiguous():
            torch.ops.aten.convolution.default(x, w, bias, *arguments)

        def channels_last():
            weight = w_last if constant_weight else w.contiguous(memory_format=layout)
            torch.ops.aten.convolution.default(x.contiguous(memory_format=layout), weight, bias,
                                               *arguments).contiguous()

        with torch.no_grad():
            base = _fastest_seconds(contiguous, repeats)
            last = _fastest_seconds(channels_last, repeats)
        _chosen[key] = last * (1 + margin) < base
    return _chosen[key]


@register_pass("braze-tune-convolutions",
               description="choose each convolution's memory format by measuring it")
def tune_convolutions(module_op, margin: str = "0.1", repeats: str = "5"):
    margin_value, repeat_count = float(margin), int(repeats)
    convolutions = []

    def collect(operation):
        if operation.name == "braze.convolution":
            convolutions.append(operation)
        return ir.WalkResult.ADVANCE

    module_op.walk(collect)
    for operation in convolutions:
        if "memory_format" in operation.attributes:
            continue  # chosen by the user, or by an earlier run
        if _channels_last_wins(operation.opview, margin_value, repeat_count):
            with operation.context:
                operation.attributes["memory_format"] = ir.StringAttr.get("channels_last")
