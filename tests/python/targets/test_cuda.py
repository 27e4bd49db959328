"""The cuda target's run path as far as it goes without a GPU: what
braze.targets() says, the cubin built by NVRTC through the cache for the
device's arch, grids from the schedule, kernel-parameter packing, and a
whole program launched through a recording driver (the real cubin is loaded
and every launch's grid, stream and parameters are checked; nothing runs on
a device). benchmarks/gpu_check.py runs it on a GPU."""

import ctypes
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import need

import braze
from braze import target as targets
from braze.hostops.signature import functions
from braze.runtime.cuda import MAX_BLOCKS, CudaKernels, KernelParameters, grid
from braze.runtime.executor import Program
from braze.testing.kernels import kernel_form

# Two kernels: short dynamic rows (a thread per row), then 1000 points.
ROW_SUM = """
func.func @f(%x: tensor<?x8xf32>, %y: tensor<?x8xf32>, %z: tensor<1000xf32>)
    -> (tensor<?x8xf32>, tensor<?xf32>, tensor<1000xf32>) {
  %s = braze.add %x, %y : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
  %r = braze.sum %s dims [1] : tensor<?x8xf32> -> tensor<?xf32>
  %w = braze.mul %z, %z : tensor<1000xf32>, tensor<1000xf32> -> tensor<1000xf32>
  return %s, %r, %w : tensor<?x8xf32>, tensor<?xf32>, tensor<1000xf32>
}"""
LONG_ROWS = """
func.func @f(%x: tensor<4x4096xf32>) -> tensor<4xf32> {
  %r = braze.sum %x dims [1] : tensor<4x4096xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}"""
GEMM = """
func.func @f(%x: tensor<?x40xf32>, %w: tensor<70x40xf32>) -> tensor<?x70xf32> {
  %y = braze.fused_gemm %x, %w extras() indexing [] transpose_rhs accumulator f32
      : (tensor<?x40xf32>, tensor<70x40xf32>) -> tensor<?x70xf32> {
  ^bb0(%acc: f32):
    %e = math.exp %acc : f32
    braze.gemm_yield %e : f32
  }
  return %y : tensor<?x70xf32>
}"""
DIVIDE = """
func.func @f(%x: tensor<6xi32>, %y: tensor<6xi32>) -> tensor<6xi32> {
  %q = braze.div %x, %y : tensor<6xi32>, tensor<6xi32> -> tensor<6xi32>
  return %q : tensor<6xi32>
}"""


@pytest.fixture(scope="module")
def cuda():
    chosen = targets.get("cuda")
    need("the cuda target", chosen.compiler_missing())
    return chosen


def _lowered(cuda, text: str, **options):
    """(module, function, unit) of `text` in the cuda target's kernel form."""
    chosen = cuda.options(options)
    module, _ = kernel_form(text, cuda.pipeline(chosen))
    func = functions(module.mlir_module.operation)["f"]
    return module, func, cuda.emit(list(func.regions[0].blocks[0].operations), chosen)


def test_targets_says_the_compiler_is_here_and_the_device_is_not(cuda):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    (listed,) = [t for t in braze.targets() if t["name"] == "cuda"]
    assert listed["compiler"] and not listed["device"]
    assert "CUDA" in listed["missing"] and "braze[cuda]" in listed["install"]
    with pytest.raises(braze.BrazeError, match=r"target 'cuda' cannot run here: .*CUDA"):
        braze.compile_mlir(ROW_SUM, target="cuda")


def test_the_cubin_is_built_through_the_cache_for_the_device_arch(cuda, monkeypatch):
    _, _, unit = _lowered(cuda, ROW_SUM)
    options = cuda.options()
    if not torch.cuda.is_available():
        assert cuda.toolchain(options, unit).flags == ("--gpu-architecture=sm_90",)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *device: (8, 6))
    assert cuda.device_arch() == "sm_86"
    assert cuda.toolchain(options, unit).flags == ("--gpu-architecture=sm_86",)
    assert cuda.toolchain(cuda.options({"arch": "sm_90a"}), unit).flags == ("--gpu-architecture=sm_90a",)
    path, cubin, _ = cuda.compile_artifact(unit, options)
    assert cubin[:4] == b"\x7fELF" and path.name == "source.cu"
    again_path, again, hit = cuda.compile_artifact(unit, options)
    assert hit and again == cubin and again_path == path


def test_grids_follow_the_schedule(cuda):
    _, _, unit = _lowered(cuda, ROW_SUM, threads=128)
    rows, points = unit.kernels.values()
    assert (rows.strategy, rows.threads, points.strategy, points.threads) == (
        "row_per_thread", 128, "points", 128)
    assert grid(rows, [1000, 8]) == (8, 128)  # ceil(1000 rows / 128), a thread per row
    assert grid(rows, [0, 8]) == (0, 128)
    assert grid(points, [1000]) == (8, 128)  # ceil(1000 points / 128), a thread per point
    (tree,) = _lowered(cuda, LONG_ROWS, threads=128)[2].kernels.values()
    assert tree.strategy == "block_tree" and grid(tree, [4, 4096]) == (4, tree.threads)  # a block per row
    with pytest.raises(braze.BrazeError, match="exceed CUDA's grid limit"):
        grid(points, [MAX_BLOCKS * 128 + 1])


def test_kernel_parameters_are_pointers_to_each_pointer():
    pointers = [0x7F0000001000, 0x7F0000002000, 0, 0x10]
    parameters = KernelParameters(pointers)
    slots = (ctypes.c_void_p * len(pointers)).from_address(parameters.address)
    assert [ctypes.c_void_p.from_address(slot).value or 0 for slot in slots] == pointers


class RecordingDriver:
    """The driver calls runtime/cuda.py makes, answered without a device:
    each launch's grid, block, stream, decoded parameters and `sizes` (read
    at launch) are recorded, and `fail` sets the failure flag as a kernel
    would."""

    def __init__(self, unit, fail: bool = False):
        from cuda.bindings import driver

        self.CUresult, self.CUstream = driver.CUresult, driver.CUstream
        # Per launch function: its parameters and `sizes` entries (a combo:
        # its buffers, then each sub-kernel's blocks and sizes).
        self.shapes = {name: (len(spec.input_types) + len(spec.result_types) + 2, spec.size_count)
                       for name, spec in unit.kernels.items()}
        for name, members in unit.launches.items():
            self.shapes[name] = (len(unit.launch_buffers[name]) + 2,
                                 len(members) + sum(unit.kernels[m].size_count for m in members))
        self.fail = fail
        self.calls, self.launches, self.loaded = [], [], []
        self.current = 0

    def _ok(self, *values):
        return (self.CUresult.CUDA_SUCCESS, *values)

    def cuGetErrorString(self, result):
        return self._ok(f"{result.name} (recorded)".encode())

    def cuInit(self, flags):
        self.calls.append("cuInit")
        return self._ok()

    def cuDeviceGet(self, ordinal):
        return self._ok(ordinal)

    def cuDevicePrimaryCtxRetain(self, device):
        self.calls.append("cuDevicePrimaryCtxRetain")
        return self._ok(0xC0)

    def cuCtxGetCurrent(self):
        return self._ok(self.current)

    def cuCtxSetCurrent(self, context):
        self.calls.append("cuCtxSetCurrent")
        self.current = context
        return self._ok()

    def cuModuleLoadData(self, image):
        self.loaded.append(image)
        return self._ok(0x30D)

    def cuModuleUnload(self, module):
        self.calls.append("cuModuleUnload")
        return self._ok()

    def cuModuleGetFunction(self, module, name):
        # The kernel must be a symbol of the cubin under its plain name
        # (extern "C", not mangled), as the driver looks it up.
        if b"\0" + name + b"\0" not in self.loaded[-1]:
            return (self.CUresult.CUDA_ERROR_NOT_FOUND, None)
        return self._ok(name.decode())

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, parameters, extra):
        count, size_count = self.shapes[function]
        slots = (ctypes.c_void_p * count).from_address(parameters)
        pointers = [ctypes.c_void_p.from_address(slot).value or 0 for slot in slots]
        sizes = list((ctypes.c_int64 * size_count).from_address(pointers[-2]))
        self.launches.append(SimpleNamespace(function=function, grid=(gx, gy, gz), block=(bx, by, bz),
                                             shared=shared, stream=int(stream), pointers=pointers, sizes=sizes))
        if self.fail:
            ctypes.c_int32.from_address(pointers[-1]).value = 1
        return self._ok()


def _recorded_program(cuda, text, monkeypatch, fail=False, **options):
    """The program of `text` over the real cubin and a recording driver;
    tensors live on the CPU so that the recorder can read them."""
    module, func, unit = _lowered(cuda, text, **options)
    _, cubin, _ = cuda.compile_artifact(unit, cuda.options(options))
    driver = RecordingDriver(unit, fail)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device: SimpleNamespace(cuda_stream=0x5EED))
    kernels = CudaKernels(cubin, "cpu", driver=driver, launch_buffers=unit.launch_buffers)
    program = Program(module.mlir_module.operation, func, kernels, list(unit.kernels.values()), unit.launches,
                      None, "cpu")
    return program, unit, driver, cubin


def test_a_program_launches_each_kernel_with_its_grid_and_pointers(cuda, monkeypatch):
    program, unit, driver, cubin = _recorded_program(cuda, ROW_SUM, monkeypatch, threads=64, combo_kernels=False)
    x, y, z = torch.randn(100, 8), torch.randn(100, 8), torch.randn(1000)
    added, total, squared = program(x, y, z)
    assert driver.loaded == [cubin] and driver.calls[:3] == ["cuInit", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent"]
    assert [launch.function for launch in driver.launches] == list(unit.kernels)
    rows, points = driver.launches
    assert (rows.grid, rows.block, points.grid, points.block) == ((2, 1, 1), (64, 1, 1), (16, 1, 1), (64, 1, 1))
    assert all(launch.shared == 0 and launch.stream == 0x5EED for launch in driver.launches)
    # Parameters: inputs, results, sizes, failed.
    assert rows.pointers[:4] == [x.data_ptr(), y.data_ptr(), added.data_ptr(), total.data_ptr()]
    assert points.pointers[:2] == [z.data_ptr(), squared.data_ptr()]
    # sizes: extents, input strides, result dims.
    assert rows.sizes == [100, 8, 8, 1, 8, 1, 100, 8, 100] and points.sizes == [1000, 1, 1000]
    assert rows.pointers[-1] == points.pointers[-1]  # neither can fail: one unused flag
    program(x[:7], y[:7], z)  # another dynamic size: sizes made per call
    assert driver.launches[2].grid == (1, 1, 1)
    assert driver.launches[2].sizes[:2] == [7, 8]
    assert "cuModuleUnload" not in driver.calls
    del program
    assert driver.calls[-1] == "cuModuleUnload"  # with the program goes its module


def test_a_fused_gemm_launches_a_block_per_tile(cuda, monkeypatch):
    """A fused GEMM (codegen/gpu_gemm.py): 256 threads per block, a block
    per 64 x 64 tile of the schedule, its sizes those of a kernel over
    [M, N, K] read from its matrices."""
    program, unit, driver, _ = _recorded_program(cuda, GEMM, monkeypatch)
    (spec,) = unit.kernels.values()
    assert (spec.strategy, spec.tile, spec.threads) == ("tiled_gemm", (64, 64, 16), 256)
    x, w = torch.randn(100, 40), torch.randn(70, 40)
    (y,) = program(x, w)
    (launch,) = driver.launches
    assert (launch.grid, launch.block) == ((2 * 2, 1, 1), (256, 1, 1))
    assert launch.pointers[:3] == [x.data_ptr(), w.data_ptr(), y.data_ptr()]
    assert launch.sizes == [100, 70, 40, 40, 1, 40, 1, 100, 70]
    program(x[:0], w)  # no rows: no launch
    assert len(driver.launches) == 1


def test_a_combo_is_one_launch_of_every_sub_kernels_blocks(cuda, monkeypatch):
    """braze-combo-kernels groups ROW_SUM's two kernels: one launch
    (codegen/gpu_combo.py), its grid every sub-kernel's blocks (sequential:
    the extents are dynamic), its parameters each buffer once, then
    `sizes` (the blocks, then each sub-kernel's sizes) and one flag."""
    program, unit, driver, _ = _recorded_program(cuda, ROW_SUM, monkeypatch, threads=64)
    assert unit.launches == {"braze_kernel_combo_0": ["braze_kernel_0", "braze_kernel_1"]}
    x, y, z = torch.randn(100, 8), torch.randn(100, 8), torch.randn(1000)
    added, total, squared = program(x, y, z)
    (launch,) = driver.launches
    assert (launch.function, launch.grid, launch.block) == ("braze_kernel_combo_0", (2 + 16, 1, 1), (64, 1, 1))
    assert launch.pointers[:6] == [x.data_ptr(), y.data_ptr(), added.data_ptr(), total.data_ptr(),
                                   z.data_ptr(), squared.data_ptr()]
    assert launch.sizes == [2, 16] + [100, 8, 8, 1, 8, 1, 100, 8, 100] + [1000, 1, 1000]
    program(x[:0], y[:0], z)  # no rows: the other sub-kernel's blocks only
    assert driver.launches[1].grid == (16, 1, 1) and driver.launches[1].sizes[:3] == [0, 16, 0]


ATTENTION = """
func.func @f(%q: tensor<2x4x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>) -> tensor<2x4x?x16xf32> {
  %o = braze.attention %q, %k, %v causal gqa : tensor<2x4x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>
      -> tensor<2x4x?x16xf32>
  return %o : tensor<2x4x?x16xf32>
}"""


def test_a_flash_attention_launches_a_block_per_query_block_and_head(cuda, monkeypatch):
    """braze-lower-attention's blocks (32 query rows, 16 keys) give a block
    of 32 threads per 32 query rows of each batch and head
    (codegen/gpu_attention.py); q, k, v and the result are its buffers, and
    `sizes` holds the domain [B, H, L, Ev, S, E, Hk], the strides and the
    result's dims, per call."""
    program, unit, driver, _ = _recorded_program(cuda, ATTENTION, monkeypatch, flash_attention=True)
    (spec,) = unit.kernels.values()
    assert (spec.strategy, spec.threads, spec.tile) == ("attention_rows", 32, (32, 16))
    q, k, v = torch.randn(2, 4, 70, 16), torch.randn(2, 2, 90, 16), torch.randn(2, 2, 90, 16)
    (out,) = program(q, k, v)
    (launch,) = driver.launches
    assert (launch.grid, launch.block) == ((2 * 4 * 3, 1, 1), (32, 1, 1))  # ceil(70 / 32) = 3 query blocks
    assert launch.pointers[:4] == [q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()]
    assert launch.sizes[:7] == [2, 4, 70, 16, 90, 16, 2]
    program(q[:, :, :1], k, v)  # a decode step: one query block per head
    assert driver.launches[1].grid == (8, 1, 1) and driver.launches[1].sizes[2] == 1


def test_a_combo_fails_when_a_sub_kernel_divides_by_zero(cuda, monkeypatch):
    text = DIVIDE.replace("-> tensor<6xi32> {", "-> (tensor<6xi32>, tensor<6xi32>) {").replace(
        "  return %q : tensor<6xi32>", "  %n = braze.neg %x : tensor<6xi32>\n  return %q, %n : tensor<6xi32>, tensor<6xi32>")
    program, unit, driver, _ = _recorded_program(cuda, text, monkeypatch, fail=True)
    assert list(unit.launches) == ["braze_kernel_combo_0"]
    x = torch.arange(6, dtype=torch.int32)
    with pytest.raises(braze.BrazeError, match=r"combo braze_kernel_combo_0 \(braze_kernel_0, braze_kernel_1\): "
                                               "integer division by zero"):
        program(x, x)
    assert len(driver.launches) == 1


def test_a_set_failure_flag_raises_like_the_cpu(cuda, monkeypatch):
    program, unit, driver, _ = _recorded_program(cuda, DIVIDE, monkeypatch, fail=True)
    assert [spec.can_fail for spec in unit.kernels.values()] == [True]
    x = torch.arange(6, dtype=torch.int32)
    with pytest.raises(braze.BrazeError, match=r"kernel braze_kernel_0 at .*: integer division by zero"):
        program(x, x)
    driver.fail = False
    program(x, x + 1)  # a fresh flag per call: the last one's 1 does not stay


def test_a_driver_failure_names_the_call(cuda, monkeypatch):
    program, _, driver, _ = _recorded_program(cuda, DIVIDE, monkeypatch)
    driver.cuModuleLoadData = lambda image: (driver.CUresult.CUDA_ERROR_INVALID_IMAGE, None)
    with pytest.raises(braze.BrazeError, match=r"CUDA driver: cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE \(CUDA_ERROR_INVALID_IMAGE \(recorded\)\)"):
        program(torch.ones(6, dtype=torch.int32), torch.ones(6, dtype=torch.int32))


def test_gpu_check_refuses_cleanly_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device")
    script = Path(__file__).parents[3] / "benchmarks" / "gpu_check.py"
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "gpu_check: the cuda target cannot run here" in run.stderr
