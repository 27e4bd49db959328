import re
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "frontend"))


def need(what: str, missing: str | None) -> None:
    """Skips when a toolchain is missing, fails instead under
    BRAZE_REQUIRE_TOOLCHAINS=1 (CI installs them all)."""
    from braze.target import require_toolchains

    if missing is None:
        return
    message = f"{what}: {missing}"
    if require_toolchains():
        pytest.fail(message + " (BRAZE_REQUIRE_TOOLCHAINS=1)")
    pytest.skip(message)


def need_program(name: str) -> str:
    path = shutil.which(name)
    need(name, None if path else f"{name} is not on PATH")
    return path


# -- shared by the C-like GPU targets' tests -----------------------------------
def random_tensor(*shape, dtype=None, seed=0):
    """A seeded normal sample of `shape` (f32 drawn, then cast to `dtype`)."""
    import torch

    sample = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    return sample if dtype is None else sample.to(dtype)


def assert_close_with_nans(actual, expected, tolerance: float) -> None:
    """Same dtype, shape and NaN elements, the rest within `tolerance`."""
    import torch

    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.equal(torch.isnan(actual), torch.isnan(expected)), "NaN elements differ"
    torch.testing.assert_close(actual.double().nan_to_num(), expected.double().nan_to_num(),
                               rtol=tolerance, atol=tolerance)


def assert_builds_for_every_gpu(target_name: str, unit, options, stack_frames: bool = False) -> None:
    """Builds `unit` as `target_name` emitted it: an sm_90 cubin for
    "cuda" (with nvcc, every kernel through ptxas without spills, and
    without a stack frame where `stack_frames` asks), a gfx90a code
    object for "hip", a pvc binary through ocloc for "opencl"."""
    import re

    from braze import target as targets
    from braze.runtime.native_cache import NativeCache
    from braze.target.compiled import OclocToolchain

    if target_name == "opencl":
        need_program("ocloc")
        assert len(NativeCache(toolchain=OclocToolchain("pvc"), salt=options.key()).load(unit.source)) > 1000
        return
    if target_name == "hip":
        need_program("hipcc")
    built = targets.get(target_name)
    source, binary, _ = built.compile_artifact(unit, options)
    if target_name == "hip":
        assert binary[:4] in (b"\x7fELF", b"__CL")
        return
    assert binary[:4] == b"\x7fELF"
    if options.compiler == "nvcc":
        report = (source.parent / "build.log").read_text()
        assert len(re.findall(r"Compiling entry function '(\w+)'", report)) == len(unit.kernels)
        spills = re.findall(r"(\d+) bytes spill (?:stores|loads)", report)
        assert spills and all(count == "0" for count in spills), report
        if stack_frames:
            frames = re.findall(r"(\d+) bytes stack frame", report)
            assert frames and all(count == "0" for count in frames), report


def emitted_unit(target_name: str, text: str, **options):
    """The target, its options and the unit it emits for the first function
    of IR `text` run through its own pipeline (skips when the target's
    compiler is missing)."""
    import braze
    from braze import target as targets
    from braze.codegen import function_operations
    from braze.ir import parse

    target = targets.get(target_name)
    need(f"the {target_name} target", target.compiler_missing())
    chosen = target.options(options)
    module = parse(text)
    braze.run_pipeline(module, target.pipeline(chosen))
    func = next(iter(module.mlir_module.body.operations))
    return target, chosen, target.emit(function_operations(func), chosen)


def nvcc_entry_functions(source) -> list[str]:
    """The entry functions nvcc's -Xptxas -v report (build.log beside
    `source`) names, once it says that none of them, nor any device
    function kept out of line, spills registers."""
    report = (source.parent / "build.log").read_text()
    entries = re.findall(r"Compiling entry function '(\w+)'", report)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", report)
    assert entries and len(spills) >= len(entries) and all(s == ("0", "0") for s in spills), report
    return entries


def torch_compile_without_fallback(model, x, target_name: str):
    """(braze's result, eager's) for `model(x)` through
    torch.compile(backend="braze"), failing where a graph runs in eager."""
    import warnings

    import torch

    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.filterwarnings("error", message="braze: .*runs in eager")
        expected = model(x)
        actual = torch.compile(model, backend="braze", options={"target": target_name})(x)
    torch._dynamo.reset()
    return actual, expected
