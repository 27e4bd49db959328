"""Compilation targets, registered under the entry-point group `braze.targets`.

A target is a small object (see `Target`): its options (a frozen dataclass
whose value enters every cache key), its pass pipeline from captured IR to
the kernel form, `emit` (kernel form -> source), `build` (source -> a
loaded binary, through the content-hash disk cache), the device it runs on,
and the step factory the executor launches kernels with.

`targets()` lists the installed targets and whether each one's compiler and
device are present; `get(name)` returns one, or raises a `BrazeError` that
names what to install.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from braze.errors import BrazeError
from braze.machine import Machine

ENTRY_POINT_GROUP = "braze.targets"


@dataclass(frozen=True)
class TargetOptions:
    """Options every target takes; a target's own options subclass these."""

    # Fuse pointwise chains and reductions into one kernel each.
    fuse: bool = True
    # Groups a cheap shared pointwise op may be recomputed in (see
    # braze-fuse-pointwise).
    recompute_limit: int = 2
    # Run 2-D convolutions, and the kernels between them, on channels-last
    # memory (braze-channels-last).
    channels_last: bool = True
    # Merge a kernel's short trailing dims into one loop (braze-collapse-dims).
    collapse_dims: bool = True
    # Split a dim a kernel takes apart with / and % (a reshape's merged dim
    # read through a permutation) into two loops (braze-split-dims).
    split_dims: bool = True
    # Start collectives early and wait for them late, over independent
    # compute (braze-overlap).
    overlap: bool = True
    # braze-overlap's mode: "simple" moves collectives only; "cost" also
    # moves compute into their gaps by estimated time, on `overlap_machine`
    # (a dict of some of memory_bandwidth, peak_flops, link_bandwidth and
    # link_latency, as for `report_machine`).
    overlap_mode: str = "simple"
    overlap_machine: dict | None = None
    # The most bytes of collectives braze-overlap lets be in flight at once
    # (started and not yet waited for, across groups): each buffer stays
    # live until its wait, so this bounds the memory overlap costs; 0: no
    # bound.
    overlap_max_inflight_bytes: int = 0
    # Merge small all_reduces of one group (data-parallel gradients) into
    # buckets of at most this many bytes before overlap
    # (braze-bucket-collectives; DDP uses 25 MiB); 0: each stays alone.
    bucket_bytes: int = 0
    # Start independent small kernels as one launch (braze-combo-kernels;
    # on targets whose renderers spell braze.combo).
    combo_kernels: bool = True
    # Read permutes, expands, slices and reshapes in place (strided GEMM
    # operands, kernel index maps) instead of copying them on the host
    # (braze-fold-layouts; the CPU target only: GPU launchers copy strided
    # inputs).
    fold_layouts: bool = True
    # Measure each static convolution in both memory formats and run it in
    # the faster (braze-tune-convolutions; the CPU target only): an
    # alternative to channels_last; its choice depends on the machine's load.
    tune_convolutions: bool = False
    # Place intermediate kernel buffers in one arena per call, reused by
    # liveness (braze-plan-memory).
    plan_memory: bool = True
    # Keep the arena even where leaving every buffer to the allocator plans
    # a lower peak (braze-plan-memory's allocator-fallback off): fewer
    # allocations per call, more memory.
    force_arena: bool = False
    # Compute 1x1 convolutions up to the target's convolution_gemm_work
    # multiply-adds as GEMMs, the pointwise ops after them in the product's
    # frame (braze-convolution-gemms; the CPU target).
    convolution_gemms: bool = True
    # Fuse each GEMM with the bias, pointwise chain and row statistics after
    # it (braze-epilogue-fusion; on targets whose emitters spell
    # braze.fused_gemm: the CPU, Triton, and the C-like GPU targets' tiled
    # GEMM).
    epilogue_fusion: bool = True
    # ... of f16/bf16 GEMMs too (braze-epilogue-fusion's half-products).
    # Off, as on the CPU by default, such a GEMM is fused only at a decode
    # shape (a static M of at most the target's decode_gemm_rows), for its
    # int8 weight or scaled_mm's scales: the CPU's fused GEMM calls MKL's
    # half GEMM per panel, slower than torch's oneDNN GEMM plus a kernel
    # (docs/cpu.md). On Triton and the C-like GPU targets the default is on.
    epilogue_fusion_halves: bool = False
    # Form one braze.attention from softmax(q @ k^T * scale + mask) @ v
    # spelled out (braze-form-attention): the scores are never written out.
    form_attention: bool = True
    # Give each braze.attention the order its only reader permutes the
    # result to (braze-order-attention): the kernel or the library writes
    # the rows there, and the transpose costs no copy.
    order_attention: bool = True
    # Run each braze.attention as a generated flash-attention kernel
    # (braze-lower-attention; on targets whose emitters spell
    # braze.flash_attention: all but the CPU without MKL) instead of the
    # library's.
    flash_attention: bool = True
    # ... f16/bf16 attentions too (off: they stay the library's, measured
    # faster on a CPU with AMX; the CPU's default is on without AMX:
    # docs/cpu.md; on Triton and the C-like GPU targets the default is on).
    flash_attention_halves: bool = False
    # Replay the whole program as one CUDA graph after a warm-up call
    # (runtime/cuda_graph.py; a program on a CUDA device with static shapes,
    # no control flow and no collectives). Not part of the cache key.
    cuda_graph: bool = False
    # Directory of the compiled-kernel cache (default: BRAZE_CACHE_DIR).
    # Not part of the cache key.
    cache_dir: str | None = None
    # Directory to write the IR after every pass and the generated source
    # into (see docs/observability.md). Not part of the cache key.
    dump_dir: str | None = None
    # Where to write the HTML compile report: a `.html` file, or a directory
    # that gets one `compile-NNN.html` per compile (default:
    # BRAZE_REPORT_DIR; see docs/observability.md). Not part of the cache key.
    report: str | None = None
    # The machine the report's collective timeline assumes: a dict of some
    # of memory_bandwidth, peak_flops, link_bandwidth (bytes or flops per
    # second) and link_latency (seconds); see braze.machine.Machine.
    # Not part of the cache key.
    report_machine: dict | None = None

    def __post_init__(self):
        for name, zero in (("bucket_bytes", "no bucketing"), ("overlap_max_inflight_bytes", "no bound")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise BrazeError(f"the {name} option must be a non-negative int (0: {zero}), got {value!r}")
        if self.overlap_mode not in ("simple", "cost"):
            raise BrazeError(f"the overlap_mode option must be 'simple' or 'cost', got {self.overlap_mode!r}")
        Machine.from_option(self.overlap_machine, "overlap_machine")

    def key(self) -> str:
        """What of the options changes a binary: everything but where files
        are written, what the report assumes and how the program is
        replayed."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                  if f.name not in ("cache_dir", "dump_dir", "report", "report_machine", "cuda_graph")}
        return f"{type(self).__name__}{sorted(fields.items())}"


@dataclass
class Built:
    """What `Target.build` returns: the step factory over the loaded binary
    (a `braze.runtime.executor.StepFactory`), and what the compile reports."""

    kernels: Any
    source_path: Any
    cache_hit: bool


@dataclass
class Unit:
    """What `Target.emit` returns: the source of every kernel of one function."""

    source: str
    kernels: dict  # kernel name -> KernelSpec, in program order
    launches: dict = dataclasses.field(default_factory=dict)  # launch name -> kernel names
    extension: str = ".cpp"
    # C-like GPU targets: launch name -> (sub-kernel, buffer) of each of its
    # buffer parameters (codegen/gpu_combo.py: launch_buffers).
    launch_buffers: dict = dataclasses.field(default_factory=dict)


class Target:
    """One compilation target. Subclasses set the class attributes and
    implement `emit`, `build` and the availability checks."""

    name = ""
    options_type = TargetOptions
    # The torch device its kernels run on ("cpu" for targets run on the host).
    device = "cpu"
    # What to install for its toolchain, e.g. "pip install 'braze[opencl]'".
    install = ""
    # Whether its kernels run on a GPU's threads and blocks: its pipeline
    # then runs braze-split-reductions and ends with braze-gpu-schedule (its
    # options need `threads`).
    gpu = False
    # The `target` braze-gpu-schedule schedules for (its warp width), when
    # not the target's own name.
    schedule_target = ""
    # Buffer arguments a combo kernel may take (braze-combo-kernels'
    # max-arguments); 0: its renderers do not spell braze.combo.
    combo_arguments = 0
    # braze-lower-attention's (q-block, kv-block) for its renderers; None:
    # the pass's defaults (measured on the CPU).
    attention_blocks: tuple[int, int] | None = None
    # braze-lower-attention's group-heads: whether its flash attention
    # emitter takes a decode step's query heads of one key/value head as one
    # work item (`grouped_heads`).
    attention_group_heads = False
    # braze-epilogue-fusion's decode-rows: a lone GEMM whose M is static and
    # at most this becomes a fused GEMM, for the target's fused GEMM reads
    # the weight of a decode shape faster than its library GEMM (0: never).
    decode_gemm_rows = 0
    # braze-convolution-gemms' max-work: the most multiply-adds of a 1x1
    # convolution the target computes as a GEMM (0: none).
    convolution_gemm_work = 0

    def fused_gemm_missing(self) -> str | None:
        """Why this target's emitters cannot run braze.fused_gemm (None:
        they can, and its pipeline runs braze-epilogue-fusion)."""
        return f"the {self.name} renderers do not spell braze.fused_gemm"

    def flash_attention_missing(self) -> str | None:
        """Why this target's emitters cannot run braze.flash_attention
        (None: they can, and its pipeline runs braze-lower-attention)."""
        return f"the {self.name} renderers do not spell braze.flash_attention"

    def options(self, given: dict | None = None) -> TargetOptions:
        known = {f.name for f in dataclasses.fields(self.options_type)}
        for key in given or {}:
            if key not in known:
                raise BrazeError(f"unknown compile option {key!r} for target {self.name!r} "
                                 f"(known: {', '.join(sorted(known))})")
        return self.options_type(**(given or {}))

    def pipeline(self, options: TargetOptions) -> str:
        """The pass pipeline that takes captured IR to the kernel form."""
        from braze.passes import combo_kernels_pass, kernel_form_pipeline

        fused_gemms = self.fused_gemm_missing() is None
        flash_attentions = self.flash_attention_missing() is None
        pipeline = kernel_form_pipeline(options.fuse, options.recompute_limit, options.channels_last,
                                        options.collapse_dims, overlap=options.overlap,
                                        # GPU launchers copy strided inputs; index maps over host
                                        # views are read in place by the CPU's kernels only.
                                        fold_layouts=options.fold_layouts and not self.gpu,
                                        epilogue_fusion=options.epilogue_fusion and fused_gemms,
                                        form_attention=options.form_attention,
                                        order_attention=options.order_attention,
                                        flash_attention=(options.flash_attention and flash_attentions
                                                         and ("halves" if options.flash_attention_halves else True)),
                                        attention_blocks=self.attention_blocks,
                                        group_heads=self.attention_group_heads,
                                        split_dims=options.split_dims,
                                        decode_rows=self.decode_gemm_rows,
                                        convolution_gemm_work=(self.convolution_gemm_work
                                                               if options.convolution_gemms else 0),
                                        half_products=options.epilogue_fusion_halves,
                                        bucket_bytes=options.bucket_bytes, overlap_mode=options.overlap_mode,
                                        overlap_machine=options.overlap_machine,
                                        overlap_max_inflight_bytes=options.overlap_max_inflight_bytes)
        if self.gpu:
            # Before grouping and scheduling: both halves of a split are ordinary kernels.
            pipeline += ",func.func(braze-split-reductions)"
        if options.combo_kernels and self.combo_arguments:
            pipeline += f",{combo_kernels_pass(self.combo_arguments)}"
        if self.gpu:
            pipeline += f",func.func(braze-gpu-schedule{{target={self.schedule_target or self.name} threads={int(options.threads)}}})"
        if options.plan_memory:
            pipeline += ",braze-plan-memory{allocator-fallback=false}" if options.force_arena else ",braze-plan-memory"
        return pipeline

    def emit(self, operations: list, options: TargetOptions) -> Unit:
        """The source of the braze.kernel ops among one function's `operations`."""
        from braze.codegen import emit_kernels

        emitted = emit_kernels(operations, self.name, getattr(options, "threads", None))
        return Unit(emitted.source, emitted.kernels, emitted.launches, emitted.extension, emitted.launch_buffers)

    def build(self, unit: Unit, options: TargetOptions) -> Built:
        raise NotImplementedError

    def run_device(self) -> str:
        """The torch device a program compiled now runs on: its tensors
        live there (a GPU target's is the current device of its type)."""
        return self.device

    def compiler_missing(self) -> str | None:
        """Why this target cannot compile here (None: it can)."""
        return None

    def device_missing(self) -> str | None:
        """Why compiled kernels cannot run here (None: they can)."""
        return None

    def require(self) -> None:
        """Raises a BrazeError naming what to install when this target cannot
        compile and run here."""
        reason = self.compiler_missing() or self.device_missing()
        if reason:
            raise BrazeError(f"target {self.name!r} cannot run here: {reason}"
                             + (f"; install it with: {self.install}" if self.install else ""))


def _entry_points() -> dict:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


_loaded: dict[str, Target] = {}


def get(name: str) -> Target:
    """The target registered as `name`."""
    if name not in _loaded:
        registered = _entry_points()
        if name not in registered:
            raise BrazeError(f"unknown target {name!r}; installed targets: "
                             f"{', '.join(sorted(registered)) or 'none'} (entry-point group "
                             f"{ENTRY_POINT_GROUP!r}; reinstall braze if this list is empty)")
        _loaded[name] = registered[name].load()()
    return _loaded[name]


def targets() -> list[dict]:
    """Every installed target: its name, whether its compiler and a device
    are present (else why not), and what to install."""
    listed = []
    for name in sorted(_entry_points()):
        target = get(name)
        compiler, device = target.compiler_missing(), target.device_missing()
        listed.append({"name": name, "compiler": compiler is None, "device": device is None,
                       "missing": compiler or device, "install": target.install})
    return listed


def require_toolchains() -> bool:
    """Whether a missing toolchain fails a test instead of skipping it (CI)."""
    return os.environ.get("BRAZE_REQUIRE_TOOLCHAINS") == "1"


def for_device(device_type: str) -> str:
    """The target that serves tensors of a torch device type. torch's "cuda"
    devices (NVIDIA, and AMD under ROCm builds) go to Triton where it is
    installed (it reaches both vendors and autotunes), else to CUDA C++."""
    served = {"cpu": "cpu", "cuda": "cuda", "xpu": "opencl", "mps": "metal"}
    if device_type not in served:
        raise BrazeError(f"no braze target serves tensors on device {device_type!r} "
                         f"(served: {', '.join(sorted(served))})")
    if device_type == "cuda" and "triton" in _entry_points() and get("triton").compiler_missing() is None:
        return "triton"
    return served[device_type]
