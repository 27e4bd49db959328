"""Combo kernels in the C-like GPU renderers (codegen/gpu_combo.py): run
on OpenCL (PoCL) and Metal (the C++ shim) against the reference
interpreter in every dispatch mode, one launch per combo; the CUDA and HIP
sources built by their compilers (no GPU needed)."""

from __future__ import annotations

import re

import pytest
import torch
from conftest import need, need_program, nvcc_entry_functions, emitted_unit

import braze
from braze import reference
from braze import target as targets
from braze.ir import parse
from braze.passes import kernel_form_pipeline, run_pipeline
from braze.runtime.native_cache import NativeCache
from braze.target.compiled import OclocToolchain

# Seven independent kernels the pass groups into one combo, with different
# threads per block at the default 256 (braze-gpu-schedule): a pointwise
# kernel (256), a block tree over static rows of 40 (64) and an argmax over
# the same input (read once by the launch), a softmax (a block tree of two
# reductions, 128), a sum over a dynamic extent into a rank-0 result
# (256), short rows (a thread per row) and an integer division that may
# divide by zero. (Those are OpenCL's; CUDA, HIP and Metal reduce the rows
# of 40 and 100 with warp trees of 256 threads, a warp per row.)
MIXED = """
func.func @f(%x: tensor<?x16xf32>, %z: tensor<5x40xf32>, %w: tensor<?x100xf32>, %v: tensor<?xf32>,
             %i: tensor<?xi32>, %j: tensor<?xi32>)
    -> (tensor<?x16xf32>, tensor<5xf32>, tensor<?x100xf32>, tensor<f32>, tensor<?xi32>, tensor<5xi64>,
        tensor<?x1xf32>) {
  %a = braze.exp %x : tensor<?x16xf32>
  %c = braze.sum %z dims [1] : tensor<5x40xf32> -> tensor<5xf32>
  %m = braze.max %w dims [1] keepdim : tensor<?x100xf32> -> tensor<?x1xf32>
  %d = braze.sub %w, %m : tensor<?x100xf32>, tensor<?x1xf32> -> tensor<?x100xf32>
  %e = braze.exp %d : tensor<?x100xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<?x100xf32> -> tensor<?x1xf32>
  %p = braze.div %e, %s : tensor<?x100xf32>, tensor<?x1xf32> -> tensor<?x100xf32>
  %t = braze.sum %v dims [0] : tensor<?xf32> -> tensor<f32>
  %q = braze.div %i, %j : tensor<?xi32>, tensor<?xi32> -> tensor<?xi32>
  %g = braze.argmax %z dims [1] : tensor<5x40xf32> -> tensor<5xi64>
  %h = braze.min %x dims [1] keepdim : tensor<?x16xf32> -> tensor<?x1xf32>
  return %a, %c, %p, %t, %q, %g, %h : tensor<?x16xf32>, tensor<5xf32>, tensor<?x100xf32>, tensor<f32>,
      tensor<?xi32>, tensor<5xi64>, tensor<?x1xf32>
}
"""
SUB_KERNELS = 7
# Equal static work, so the pass may interleave it (round_robin), with a
# block tree beside pointwise kernels.
STATIC = """
func.func @f(%x: tensor<64x32xf32>, %y: tensor<64x32xf32>, %z: tensor<16x300xf32>)
    -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<16xf32>) {
  %a = braze.tanh %x : tensor<64x32xf32>
  %b = braze.mul %y, %x : tensor<64x32xf32>, tensor<64x32xf32> -> tensor<64x32xf32>
  %c = braze.max %z dims [1] : tensor<16x300xf32> -> tensor<16xf32>
  return %a, %b, %c : tensor<64x32xf32>, tensor<64x32xf32>, tensor<16xf32>
}
"""
# The Metal shim runs a std::thread per Metal thread: fewer threads per
# block there, still more than the smallest sub-kernel's (idle threads).
OPTIONS = {"opencl": {}, "metal": {"threads": 128}}
# Per target: the sizes a call runs with (0, a partial block, several
# blocks; PoCL takes large ones quickly, the shim does not).
ROWS = {"opencl": (0, 3, 77, 3000), "metal": (0, 3, 77)}


@pytest.fixture(params=sorted(OPTIONS))
def target(request):
    need(f"the {request.param} target", targets.get(request.param).compiler_missing())
    return request.param


def _compiled(text: str, target: str, dispatch: str, **options):
    module = parse(text)
    run_pipeline(module, kernel_form_pipeline() + f",func.func(braze-combo-kernels{{dispatch={dispatch}}})")
    return braze.compile_mlir(module, target=target, options={**OPTIONS[target], **options})


def _mixed_arguments(rows: int, divisor_zero: bool = False):
    divisor = torch.randint(1, 9, (rows * 3,), dtype=torch.int32) * (1 - 2 * (torch.arange(rows * 3) % 2)).int()
    if divisor_zero and rows:
        divisor[-1] = 0
    return (torch.randn(rows, 16), torch.randn(5, 40), torch.randn(rows, 100) * 4, torch.randn(rows * 7),
            torch.randint(-1000, 1000, (rows * 3,), dtype=torch.int32), divisor)


class _CountedLaunches:
    """Device launches, counted where each target's launcher starts one."""

    def __init__(self, monkeypatch, target: str):
        self.count = 0
        if target == "opencl":
            from braze.runtime import opencl

            enqueue = opencl._enqueue

            def counted(*args, **kwargs):
                self.count += 1
                return enqueue(*args, **kwargs)

            monkeypatch.setattr(opencl, "_enqueue", counted)
        else:
            from braze.target import metal_shim

            runner = metal_shim._runner

            def counted_runner(library, name):
                function = runner(library, name)

                def run(*args):
                    self.count += 1
                    return function(*args)

                return run

            monkeypatch.setattr(metal_shim, "_runner", counted_runner)


@pytest.mark.parametrize("dispatch", ["sequential", "flattened"])
def test_mixed_sub_kernels_are_one_launch_matching_the_reference(target, dispatch, monkeypatch):
    launches = _CountedLaunches(monkeypatch, target)
    program = _compiled(MIXED, target, dispatch)
    assert (program.stats["launches"], program.stats["kernels"]) == (1, SUB_KERNELS)
    source = program.stats["source"].read_text()
    # One launch function; the sub-kernels are device functions with
    # their own threads. On OpenCL the block tree over rows of 40 has 64
    # threads, so the launch idles some of its threads; Metal reduces rows
    # of 40 and 100 with warp trees of the launch's threads instead.
    assert len(re.findall(r"^(__kernel|kernel) void", source, re.M)) == 1
    if target == "opencl":
        assert "const int my_points = tid < 64 ? reduce_points : 0;" in source
    else:
        assert "simd_shuffle_down(" in source
    for rows in ROWS[target]:
        args = _mixed_arguments(rows)
        before = launches.count
        got = program(*args)
        assert launches.count - before == 1  # with 0 rows too: the static %z has work
        for name, value, expected in zip("acptqgh", got, reference.run(parse(MIXED), *args)):
            torch.testing.assert_close(value, expected, msg=lambda m: f"result %{name}, {rows} rows: {m}")


def test_sub_kernels_with_fewer_threads_than_their_launch_idle_the_rest(target):
    """braze-gpu-schedule gives a block tree fewer threads than the launch
    only when its rows are shorter; a schedule written by hand may give
    any: here 32 threads for every sub-kernel but the rank-0 sum (the
    launch's threads), over rows of 100 and 2000 points. An idle thread
    writing its (empty) partial result into a tree slot would land in the
    next buffer of the pool (the argmax's indices) and fail this."""
    from mlir import ir

    from braze.codegen import function_operations
    from braze.codegen.analysis import combo_kernels
    from braze.runtime.executor import Program

    chosen = targets.get(target)
    options = chosen.options(OPTIONS[target])
    text = MIXED.replace("5x40xf32", "5x2000xf32")  # rows longer than the 32 threads that reduce them
    module = parse(text)
    run_pipeline(module, chosen.pipeline(options))
    func = next(iter(module.mlir_module.body.operations))
    (combo,) = [op for op in function_operations(func) if op.operation.name == "braze.combo"]
    with module.context:
        for kernel in combo_kernels(combo):
            schedule = ir.DictAttr(kernel.attributes["braze.schedule"])
            if ir.StringAttr(schedule["strategy"]).value == "block_tree" and list(kernel.attributes["reduce"]) == [0]:
                continue  # the rank-0 sum keeps the launch's threads
            kernel.attributes["braze.schedule"] = ir.DictAttr.get({
                "strategy": schedule["strategy"], "threads": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 32)})
    unit = chosen.emit(function_operations(func), options)
    assert sorted(spec.threads for spec in unit.kernels.values()) == [32] * (SUB_KERNELS - 1) + [options.threads]
    built = chosen.build(unit, options)
    program = Program(module.mlir_module.operation, func, built.kernels, list(unit.kernels.values()), unit.launches,
                      None, "cpu")
    for rows in ROWS[target]:
        args = _mixed_arguments(rows)
        args = (args[0], torch.randn(5, 2000)) + args[2:]
        for name, value, expected in zip("acptqgh", program(*args), reference.run(parse(text), *args)):
            # Sums of 2000 points in 32 partial sums round unlike torch's (~1e-5).
            torch.testing.assert_close(value, expected, rtol=1e-4, atol=1e-4,
                                       msg=lambda m: f"result %{name}, {rows} rows: {m}")


def test_round_robin_interleaves_equal_static_work(target, monkeypatch):
    launches = _CountedLaunches(monkeypatch, target)
    program = _compiled(STATIC, target, "round_robin")
    assert (program.stats["launches"], program.stats["kernels"]) == (1, 3)
    assert "bz_block % 3" in program.stats["source"].read_text()
    args = (torch.randn(64, 32), torch.randn(64, 32), torch.randn(16, 300))
    for got, expected in zip(program(*args), reference.run(parse(STATIC), *args)):
        torch.testing.assert_close(got, expected)
    assert launches.count == 1


def test_the_target_pipeline_groups_and_shares_a_read_input(target):
    """Without a forced dispatch: the target's own pipeline runs
    braze-combo-kernels; %x, read by two sub-kernels, is one parameter."""
    program = braze.compile_mlir(STATIC, target=target, options=OPTIONS[target])
    assert (program.stats["launches"], program.stats["kernels"]) == (1, 3)
    launch = re.search(r"void braze_kernel_combo_0\((.*?)\)", program.stats["source"].read_text()).group(1)
    assert launch.count("k0_in0") == 1 and "k1_in1" not in launch  # %x once, as the first reader's
    args = (torch.randn(64, 32), torch.randn(64, 32), torch.randn(16, 300))
    for got, expected in zip(program(*args), reference.run(parse(STATIC), *args)):
        torch.testing.assert_close(got, expected)


def test_a_sub_kernel_dividing_by_zero_fails_the_combo(target):
    program = _compiled(MIXED, target, "sequential")
    with pytest.raises(braze.BrazeError, match=r"combo braze_kernel_combo_0 \(.*\): integer division by zero"):
        program(*_mixed_arguments(5, divisor_zero=True))
    program(*_mixed_arguments(5))  # a fresh flag per call


def test_more_blocks_than_a_y_grid_holds():
    """65536 blocks of 32 threads (a 1-D grid has no 65535 limit) in every
    dispatch, checked on PoCL."""
    need("the opencl target", targets.get("opencl").compiler_missing())
    rows = 65536 * 32 // 16 + 5
    for dispatch in ("sequential", "flattened"):
        program = _compiled(MIXED, "opencl", dispatch, threads=32)
        # Only %x is large (its sub-kernel's 65537 blocks); a long float
        # sum would only differ from the reference's in its rounding.
        x, z, w, _, i, j = _mixed_arguments(rows // 64)
        args = (torch.randn(rows, 16), z, w, torch.randn(7), i, j)
        for got, expected in zip(program(*args), reference.run(parse(MIXED), *args)):
            torch.testing.assert_close(got, expected)


def test_a_launch_past_the_argument_table_is_refused(monkeypatch):
    from braze.codegen import emit_kernels, function_operations
    from braze.codegen.metal import MetalRenderer

    chains = "\n".join(f"  %r{k} = braze.neg %x{k} : tensor<16xf32>" for k in range(8))
    text = (f"func.func @f({', '.join(f'%x{k}: tensor<16xf32>' for k in range(8))}) -> "
            f"({', '.join(['tensor<16xf32>'] * 8)}) {{\n{chains}\n"
            f"  return {', '.join(f'%r{k}' for k in range(8))} : {', '.join(['tensor<16xf32>'] * 8)}\n}}")
    module = parse(text)
    run_pipeline(module, kernel_form_pipeline() + ",func.func(braze-combo-kernels)")
    operations = function_operations(next(iter(module.mlir_module.body.operations)))
    assert targets.get("metal").combo_arguments + 2 == MetalRenderer.max_launch_parameters == 31
    emit_kernels(operations, "metal")  # 16 buffers, sizes, failed: 18 of 31
    monkeypatch.setattr(MetalRenderer, "max_launch_parameters", 17)
    with pytest.raises(braze.BrazeError, match=r"combo braze_kernel_combo_0: 18 parameters \(16 buffers"):
        emit_kernels(operations, "metal")


def _combo_unit(target_name: str, **options):
    target, chosen, unit = emitted_unit(target_name, MIXED, **options)
    assert list(unit.launches) == ["braze_kernel_combo_0"] and len(unit.kernels) == SUB_KERNELS
    return target, chosen, unit


@pytest.mark.parametrize("compiler", ["nvrtc", "nvcc"])
def test_the_cuda_combo_builds_an_sm90_cubin(compiler):
    if compiler == "nvcc":
        need_program("nvcc")
    cuda, options, unit = _combo_unit("cuda", compiler=compiler)
    assert "__launch_bounds__(256) braze_kernel_combo_0" in unit.source
    assert unit.source.count("__global__") == 1 and unit.source.count("static __device__ void") == SUB_KERNELS
    source, cubin, _ = cuda.compile_artifact(unit, options)
    assert cubin[:4] == b"\x7fELF" and b"\0braze_kernel_combo_0\0" in cubin
    if compiler == "nvcc":
        assert nvcc_entry_functions(source) == ["braze_kernel_combo_0"]


def test_the_hip_combo_builds_for_gfx90a():
    need_program("hipcc")
    hip, options, unit = _combo_unit("hip")
    _, code_object, _ = hip.compile_artifact(unit, options)
    assert code_object[:4] in (b"\x7fELF", b"__CL")


def test_ocloc_builds_the_opencl_combo_for_pvc():
    need_program("ocloc")
    _, options, unit = _combo_unit("opencl")
    binary = NativeCache(toolchain=OclocToolchain("pvc"), salt=options.key()).load(unit.source)
    assert len(binary) > 1000
