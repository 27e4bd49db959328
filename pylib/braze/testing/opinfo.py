"""PyTorch's OpInfo samples captured by braze.export and run on the
reference interpreter, compared with eager PyTorch.

Each sample ends as one of:
- "pass": braze's result matches eager;
- "mismatch": braze ran and computed something else (a bug, always);
- "unsupported": braze refused the sample with a BrazeError (an op or an
  argument it does not handle), which is the promised behaviour;
- "error": braze failed with an internal error (a bug, always);
- "untraceable": torch.export itself cannot capture the sample.

A backend is "reference", a target's name (compiled and run), or a
target's name with ":build" (its kernels compiled, not run: a GPU
target's compiler where no GPU is): there "pass" means the kernels built.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from dataclasses import dataclass

import torch
import torch.utils._pytree as pytree

import braze

# OpInfo entries (name, variant) whose lowering braze provides.
OPINFO_OPS = [
    ("add", ""), ("sub", ""), ("mul", ""), ("div", "no_rounding_mode"), ("div", "trunc_rounding"),
    ("maximum", ""), ("minimum", ""), ("clamp", ""), ("pow", ""), ("neg", ""), ("abs", ""),
    ("exp", ""), ("log", ""), ("tanh", ""), ("sigmoid", ""), ("nn.functional.relu", ""),
    ("nn.functional.silu", ""), ("sqrt", ""), ("rsqrt", ""), ("erf", ""), ("reciprocal", ""),
    ("nn.functional.gelu", ""), ("eq", ""), ("ne", ""), ("lt", ""), ("le", ""), ("gt", ""),
    ("ge", ""), ("logical_and", ""), ("logical_or", ""), ("logical_xor", ""), ("logical_not", ""),
    ("bitwise_not", ""), ("where", ""), ("masked_fill", ""), ("sum", ""), ("mean", ""),
    ("amax", ""), ("amin", ""), ("argmax", ""), ("any", ""), ("all", ""),
    ("max", "reduction_with_dim"), ("mm", ""), ("bmm", ""), ("addmm", ""), ("matmul", ""),
    ("nn.functional.linear", ""), ("nn.functional.layer_norm", ""),
    ("nn.functional.rms_norm", ""), ("softmax", ""), ("log_softmax", ""),
    ("nn.functional.embedding", ""), ("index_select", ""), ("view", ""), ("reshape", ""),
    ("permute", ""), ("transpose", ""), ("t", ""), ("expand", ""), ("cat", ""), ("split", ""),
    ("split_with_sizes", ""), ("squeeze", ""), ("unsqueeze", ""), ("select", ""),
    ("narrow", ""), ("full_like", ""), ("zeros_like", ""), ("ones_like", ""),
    ("nn.functional.scaled_dot_product_attention", ""), ("to", ""),
    ("sin", ""), ("cos", ""), ("tan", ""), ("asin", ""), ("acos", ""), ("atan", ""), ("atan2", ""),
    ("sinh", ""), ("cosh", ""), ("expm1", ""), ("exp2", ""), ("log1p", ""), ("log2", ""),
    ("floor", ""), ("ceil", ""), ("trunc", ""), ("round", ""), ("round", "decimals_3"),
    ("round", "decimals_neg_3"), ("sign", ""), ("remainder", ""), ("fmod", ""), ("isnan", ""),
    ("isinf", ""), ("nn.functional.leaky_relu", ""), ("nn.functional.elu", ""),
    ("nn.functional.selu", ""), ("nn.functional.mish", ""), ("nn.functional.softplus", ""),
    ("nn.functional.hardswish", ""), ("nn.functional.hardsigmoid", ""), ("nn.functional.hardtanh", ""),
    ("nn.functional.pad", "constant"), ("nn.functional.avg_pool1d", ""), ("nn.functional.avg_pool2d", ""),
    ("nn.functional.avg_pool3d", ""), ("nn.functional.max_pool2d", ""), ("linalg.vector_norm", ""),
    ("nn.functional.normalize", ""),
]


@dataclass
class SampleResult:
    op: str
    dtype: torch.dtype
    outcome: str
    detail: str = ""
    backend: str = ""
    sample: int = 0  # its index among the dtype's samples


def opinfos() -> dict[str, object]:
    """The OpInfo entries of OPINFO_OPS, by display name."""
    from torch.testing._internal.common_methods_invocations import op_db

    by_key = {(info.name, info.variant_test_name): info for info in op_db}
    return {f"{name}.{variant}" if variant else name: by_key[(name, variant)]
            for name, variant in OPINFO_OPS if (name, variant) in by_key}


class _Call(torch.nn.Module):
    """op(*args, **kwargs) with the sample's tensors as the module's inputs."""

    def __init__(self, op, spec, constants):
        super().__init__()
        self.op, self.spec, self.constants = op, spec, constants

    def forward(self, *tensors):
        leaves = list(self.constants)
        it = iter(tensors)
        leaves = [next(it) if leaf is None else leaf for leaf in leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self.spec)
        return self.op(*args, **kwargs)


# (rtol, atol) per result dtype: half-precision composites (SDPA, norms) round
# at each decomposed step where a fused eager kernel rounds once.
TOLERANCES = {torch.float32: (1e-4, 1e-4), torch.float64: (1e-7, 1e-7),
              torch.float16: (2e-3, 1e-3), torch.bfloat16: (2e-2, 1e-2)}


BUILD_ONLY = ":build"


def _build(program, target_name: str) -> None:
    """The program's kernels emitted for `target_name` and compiled by its
    toolchain (a refusal before the compiler is a BrazeError too)."""
    from braze import target as targets
    from braze.testing.kernels import kernel_form

    chosen = targets.get(target_name)
    options = chosen.options()
    _, kernels = kernel_form(program.module, chosen.pipeline(options))
    if kernels:
        chosen.compile_artifact(chosen.emit(kernels, options), options)


def _runner(program, backend: str):
    """The exported program run by `backend`: "reference" or a target's name."""
    if backend == "reference":
        return program
    compiled = braze.compile_mlir(program.module, backend, parameters=program.parameters)
    return lambda *tensors: pytree.tree_unflatten(compiled(*tensors), program._out_spec)


def sample_model(info, sample) -> tuple[torch.nn.Module, tuple]:
    """The sample as a module over its tensors, and those tensors."""
    call = ((sample.input, *sample.args), dict(sample.kwargs))
    leaves, spec = pytree.tree_flatten(call)
    tensors = tuple(x for x in leaves if isinstance(x, torch.Tensor))
    constants = [None if isinstance(x, torch.Tensor) else x for x in leaves]
    return _Call(info.op, spec, constants), tensors


def run_sample(info, sample, dtype, backends=("reference",), index: int = 0) -> list[SampleResult]:
    """The sample (the dtype's `index`th) exported once and run by each of
    `backends` ("reference", or a target's name), compared with eager: one
    result per backend."""
    name = f"{info.name}.{info.variant_test_name}" if info.variant_test_name else info.name
    model, tensors = sample_model(info, sample)

    def each(outcome: str, detail: str = "") -> list[SampleResult]:
        return [SampleResult(name, dtype, outcome, detail, backend, index) for backend in backends]

    try:
        with torch.no_grad():
            expected = model(*tensors)
    except Exception as error:  # the sample is invalid for eager too
        return each("untraceable", f"eager: {error}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = braze.export(model, tensors)
    except braze.BrazeError as error:
        if "torch.export could not capture" in error.message:
            outcome = "untraceable"
        else:
            outcome = "error" if "(a braze bug)" in error.message else "unsupported"
        return each(outcome, error.message.splitlines()[0][:300])
    return [_run_backend(program, tensors, expected, SampleResult(name, dtype, "pass", "", backend, index))
            for backend in backends]


def _run_backend(program, tensors, expected, result: SampleResult) -> SampleResult:
    """`result` with the outcome of running `program` on its backend."""
    if result.backend.endswith(BUILD_ONLY):
        try:
            _build(program, result.backend.removesuffix(BUILD_ONLY))
        except braze.BrazeError as error:
            return dataclasses.replace(result, outcome="error", detail=error.message.splitlines()[0][:300])
        return result
    try:
        runner = _runner(program, result.backend)
    except braze.BrazeError as error:  # the reference ran it: a backend gap
        return dataclasses.replace(result, outcome="error", detail=error.message.splitlines()[0][:300])
    try:
        actual = runner(*tensors)
    except braze.BrazeError as error:
        return dataclasses.replace(result, outcome="unsupported", detail=error.message.splitlines()[0][:300])
    expected_leaves, actual_leaves = pytree.tree_leaves(expected), pytree.tree_leaves(actual)
    try:
        assert len(expected_leaves) == len(actual_leaves), "a different number of outputs"
        for e, a in zip(expected_leaves, actual_leaves):
            if isinstance(e, torch.Tensor):
                rtol, atol = TOLERANCES.get(e.dtype, (0, 0))
                torch.testing.assert_close(a, e, rtol=rtol, atol=atol, equal_nan=True)
            else:
                assert a == e, f"{a} != {e}"
    except AssertionError as error:
        return dataclasses.replace(result, outcome="mismatch", detail=str(error).strip().splitlines()[0][:300])
    return result


def run_op(info, plan: dict[str, tuple[tuple, int | None]]) -> list[SampleResult]:
    """The op's samples, each exported once and run by every backend of
    `plan` (backend -> (dtypes, samples per dtype, None for all)) that
    wants it."""
    results = []
    for dtype in dict.fromkeys(dtype for dtypes, _ in plan.values() for dtype in dtypes):
        if dtype not in info.supported_dtypes("cpu"):
            continue
        samples = info.sample_inputs("cpu", dtype, requires_grad=False)
        for i, sample in enumerate(samples):
            backends = tuple(backend for backend, (dtypes, count) in plan.items()
                             if dtype in dtypes and (count is None or i < count))
            if not backends:
                break
            results += run_sample(info, sample, dtype, backends, i)
    return results


def summarize(results: list[SampleResult]) -> Counter:
    return Counter(r.outcome for r in results)
