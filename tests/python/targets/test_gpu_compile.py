"""Every kernel of every capture-suite model compiles with each GPU target's
real compiler: nvcc (no register spills, from its -Xptxas -v report), NVRTC
to an sm_90 cubin, hipcc for gfx90a, ocloc for Intel's pvc, and the Metal
source as C++ against the shim header. No GPU is needed."""


import pytest
from conftest import need, need_program, nvcc_entry_functions
from kernels import MODEL_NAMES, model_kernels

import braze
from braze import target as targets
from braze.runtime.native_cache import NativeCache
from braze.target.compiled import OclocToolchain
from braze.testing.kernels import emitted_operations


def _compile(target_name: str, model: str, **options):
    """The model's kernels and combos as the target emits them, built."""
    target = targets.get(target_name)
    need(f"the {target_name} target", target.compiler_missing())
    chosen = target.options(options)
    module, kernels = model_kernels(model)
    unit = target.emit(emitted_operations(module), chosen)
    assert len(unit.kernels) == len(kernels) >= 1
    return target.compile_artifact(unit, chosen)


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_nvcc_builds_sm90_cubins_without_register_spills(model):
    need_program("nvcc")
    source, cubin, _ = _compile("cuda", model, compiler="nvcc")
    assert cubin[:4] == b"\x7fELF"
    # Standalone kernels (fused GEMMs included) and combo launches.
    assert len(nvcc_entry_functions(source)) == source.read_text().count("__global__")


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_nvrtc_builds_sm90_cubins(model):
    _, cubin, _ = _compile("cuda", model, compiler="nvrtc")
    assert cubin[:4] == b"\x7fELF"


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_hipcc_builds_gfx90a_code_objects(model):
    need_program("hipcc")
    _, code_object, _ = _compile("hip", model)
    assert code_object[:4] in (b"\x7fELF", b"__CL")  # an offload bundle or an ELF code object


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_ocloc_builds_the_opencl_c_for_pvc(model):
    need_program("ocloc")
    opencl = targets.get("opencl")
    options = opencl.options()
    module, _ = model_kernels(model)
    unit = opencl.emit(emitted_operations(module), options)
    binary = NativeCache(toolchain=OclocToolchain("pvc"), salt=options.key()).load(unit.source)
    assert len(binary) > 1000


@pytest.mark.parametrize("model", MODEL_NAMES)
def test_metal_source_compiles_as_cpp_against_the_shim(model):
    _compile("metal", model)


def test_a_compile_failure_names_the_message_and_the_kept_source(monkeypatch):
    from braze.codegen.cuda import CudaRenderer

    monkeypatch.setattr(CudaRenderer, "head", CudaRenderer.head + "\n#error braze test failure\n")
    with pytest.raises(braze.BrazeError) as caught:
        _compile("cuda", "mlp", compiler="nvrtc")
    message = str(caught.value)
    assert "braze test failure" in message and "source.cu; the source is kept there" in message
