"""The target interface: registration, options, availability, errors, and
the torch.compile backend choosing a target."""

import dataclasses

import pytest
import torch

import braze
from braze import target as targets_module
from braze.target import Target, TargetOptions, for_device

SOFTMAX = """
func.func @f(%x: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %e = braze.exp %x : tensor<?x32xf32>
  %s = braze.sum %e dims [1] keepdim : tensor<?x32xf32> -> tensor<?x1xf32>
  %q = braze.div %e, %s : tensor<?x32xf32>, tensor<?x1xf32> -> tensor<?x32xf32>
  return %q : tensor<?x32xf32>
}"""


def test_installed_targets_are_listed_with_their_toolchains():
    listed = {t["name"]: t for t in braze.targets()}
    assert listed["cpu"]["compiler"] and listed["cpu"]["device"] and listed["cpu"]["missing"] is None
    for entry in listed.values():
        assert set(entry) == {"name", "compiler", "device", "missing", "install"}
        assert entry["install"], f"target {entry['name']} does not say what to install"


def test_options_are_a_frozen_dataclass_whose_key_ignores_the_cache_directory():
    cpu = targets_module.get("cpu")
    options = cpu.options({"recompute_limit": 3, "cache_dir": "/tmp/x"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.fuse = False
    assert options.key() == cpu.options({"recompute_limit": 3}).key()
    assert options.key() != cpu.options({"recompute_limit": 2}).key()
    with pytest.raises(braze.BrazeError, match="unknown compile option 'fuse_all' for target 'cpu'"):
        cpu.options({"fuse_all": True})


def test_unknown_target_names_the_installed_ones():
    with pytest.raises(braze.BrazeError, match=r"unknown target 'tpu'; installed targets: .*cpu"):
        braze.compile_mlir(SOFTMAX, target="tpu")


class _Unavailable(Target):
    name = "nowhere"
    install = "pip install 'braze[nowhere]'"

    def compiler_missing(self):
        return "no nowhere-compiler on PATH"


def test_a_missing_toolchain_is_an_error_naming_what_to_install(monkeypatch):
    monkeypatch.setitem(targets_module._loaded, "nowhere", _Unavailable())
    with pytest.raises(braze.BrazeError, match=r"no nowhere-compiler on PATH; install it with: pip install 'braze\[nowhere\]'"):
        braze.compile_mlir(SOFTMAX, target="nowhere")


def test_devices_map_to_targets():
    assert [for_device(d) for d in ("cpu", "xpu", "mps")] == ["cpu", "opencl", "metal"]
    # CUDA tensors go to Triton where it is installed, else to CUDA C++.
    assert for_device("cuda") == ("triton" if targets_module.get("triton").compiler_missing() is None else "cuda")
    with pytest.raises(braze.BrazeError, match="no braze target serves tensors on device 'meta'"):
        for_device("meta")


def test_compile_reports_its_target_and_keys_the_cache_on_options(tmp_path):
    first = braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path)})
    assert first.stats["target"] == "cpu" and not first.stats["cache_hit"]
    assert braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path)}).stats["cache_hit"]
    other = braze.compile_mlir(SOFTMAX, options={"cache_dir": str(tmp_path), "recompute_limit": 5})
    assert not other.stats["cache_hit"]  # another options value, another entry


def test_torch_compile_takes_a_forced_target_and_refuses_unknown_options():
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
    x = torch.randn(4, 8)
    compiled = torch.compile(model, backend="braze", options={"target": "cpu", "recompute_limit": 1})
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown compile option 'bogus'"):
        torch.compile(model, backend="braze", options={"bogus": 1})(x)
    torch._dynamo.reset()


def test_default_options_match_the_dataclass():
    assert braze.compiler.DEFAULT_OPTIONS == {f.name: f.default for f in dataclasses.fields(TargetOptions)}
    assert "braze-channels-last" in braze.compiler.pipeline({})
    assert "braze-tune-convolutions" in braze.compiler.pipeline({"tune_convolutions": True})


def test_bucket_bytes_adds_gradient_bucketing_before_fusion():
    assert "braze-bucket-collectives" not in braze.compiler.pipeline({})
    pipeline = braze.compiler.pipeline({"bucket_bytes": 4096, "flash_attention_halves": False})
    assert ("braze-verify-collective-order,braze-convolution-gemms{max-work=8388608},"
            "braze-bucket-collectives{bucket-bytes=4096},braze-form-attention,braze-order-attention,"
            "braze-lower-attention{group-heads=true},braze-epilogue-fusion" in pipeline)
    for bad in (-1, 1.5, True):
        with pytest.raises(braze.BrazeError, match=rf"bucket_bytes option must be a non-negative int .*got {bad!r}"):
            targets_module.get("cpu").options({"bucket_bytes": bad})


def test_overlap_mode_cost_passes_the_machine_to_braze_overlap():
    assert ",braze-overlap,braze-verify-collective-order" in braze.compiler.pipeline({})
    pipeline = braze.compiler.pipeline({"overlap_mode": "cost", "overlap_machine": {"link_bandwidth": 1e9}})
    assert ("braze-overlap{mode=cost link-bandwidth=1000000000.0 link-latency=1e-05 "
            "memory-bandwidth=100000000000.0 peak-flops=1000000000000.0}") in pipeline
    cpu = targets_module.get("cpu")
    with pytest.raises(braze.BrazeError, match="overlap_mode option must be 'simple' or 'cost', got 'fast'"):
        cpu.options({"overlap_mode": "fast"})
    with pytest.raises(braze.BrazeError, match=r"overlap_machine\['link_bandwidth'\] must be a positive number"):
        cpu.options({"overlap_machine": {"link_bandwidth": 0}})


def test_overlap_max_inflight_bytes_bounds_braze_overlap():
    assert ",braze-overlap{max-inflight-bytes=4096}," in braze.compiler.pipeline({"overlap_max_inflight_bytes": 4096})
    both = braze.compiler.pipeline({"overlap_mode": "cost", "overlap_max_inflight_bytes": 64})
    assert "braze-overlap{mode=cost link-bandwidth=" in both and "peak-flops=1000000000000.0 max-inflight-bytes=64}" in both
    for bad in (-1, 2.5, False):
        with pytest.raises(braze.BrazeError, match=rf"overlap_max_inflight_bytes option must be a non-negative int "
                                                   rf"\(0: no bound\), got {bad!r}"):
            targets_module.get("cpu").options({"overlap_max_inflight_bytes": bad})
