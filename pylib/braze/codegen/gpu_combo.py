"""A `braze.combo` in the C-like GPU languages (CUDA, HIP, OpenCL C, Metal):
one launch function over a 1-D grid of blocks that calls each sub-kernel as
a device function (codegen/gpu.py renders those with `launch_threads`).

Parameters: every buffer the sub-kernels read or write, once (a tensor two
sub-kernels read is one parameter, named after its first reader: `k<j>_in<n>`
or `k<j>_out<n>`), then `sizes` and `failed`. `sizes` is one int64 array: the
number of blocks of each sub-kernel (K entries, computed by the host per
call from its extents with `KernelSpec.blocks`, dynamic extents included),
then each sub-kernel's own sizes array (codegen/gpu.py's layout: exactly
`KernelSpec.size_count` entries), one after the other. `failed` is one flag
for the whole combo.

Block b of the launch runs one block of one sub-kernel, chosen by the
combo's dispatch (B_k: sub-kernel k's blocks, K sub-kernels, M = max B_k):

* sequential: sub-kernel k owns blocks [B_0 + ... + B_(k-1), ... + B_k);
* round_robin: b = item * K + k; the pass picks it for equal static work,
  and a block past B_k idles, so unequal counts stay correct;
* flattened: b = k * M + item; blocks past B_k idle.

The grid (`runtime/combo.py: launch_size`) has one axis only, so a combo of
many blocks never meets the 65535 limit of a y-grid. Each block runs one
sub-kernel, so every thread of a block takes the same branch and meets the
same barriers.

Threads: the launch has the most threads of its sub-kernels; a sub-kernel
with fewer idles the rest (codegen/gpu.py says how, around barriers).
Shared memory: one pool of 8-byte words declared by the launch function,
sized for the sub-kernel that needs the most (a block runs one sub-kernel
at a time); each sub-kernel carves its buffers from it. OpenCL C and MSL
allow local/threadgroup declarations only at a kernel's own scope anyway.
"""

from __future__ import annotations

from braze.codegen.analysis import KernelAnalysis, KernelSpec
from braze.codegen.gpu import GpuRenderer
from braze.errors import BrazeError

DISPATCHES = ("sequential", "round_robin", "flattened")


def launch_buffers(analyses: list[KernelAnalysis]) -> tuple[list[tuple[int, int]], list[list[int]]]:
    """The launch's buffer parameters: per parameter the (sub-kernel, buffer
    number) it is first, buffers being a sub-kernel's inputs then results;
    and per sub-kernel, the parameter each of its buffers is passed. A
    value passed already (an input an earlier sub-kernel reads too) is not
    passed again: braze-combo-kernels counts distinct buffers against the
    target's argument limit, and so does the launch."""
    first: dict = {}
    plan, passed = [], []
    for k, analysis in enumerate(analyses):
        own = []
        for n, value in enumerate(analysis.inputs + analysis.results):
            if value not in first:
                first[value] = len(plan)
                plan.append((k, n))
            own.append(first[value])
        passed.append(own)
    return plan, passed


def _buffer_name(analysis: KernelAnalysis, k: int, n: int) -> str:
    inputs = len(analysis.inputs)
    return f"k{k}_in{n}" if n < inputs else f"k{k}_out{n - inputs}"


def render_combo(name: str, combo, renderers: list[GpuRenderer],
                 specs: list[KernelSpec]) -> tuple[str, list[tuple[int, int]]]:
    """The launch function `name` of `combo`, whose sub-kernels `renderers`
    rendered (as device functions; `specs` their specs), and its buffer
    parameters (see `launch_buffers`)."""
    dispatch = combo.attributes["dispatch"].value
    if dispatch not in DISPATCHES:
        raise BrazeError(f"combo {name}: unknown dispatch {dispatch!r} (known: {', '.join(DISPATCHES)})")
    spelling = renderers[0]  # the target's spellings; every sub-kernel has the same
    analyses = [r.a for r in renderers]
    plan, passed = launch_buffers(analyses)
    names = [_buffer_name(analyses[k], k, n) for k, n in plan]
    # A sub-kernel's parameter strings with the launch's names.
    params = [renderers[k].parameters()[n].rsplit(" ", 1)[0] + f" {names[p]}" for p, (k, n) in enumerate(plan)]
    params += spelling.parameters()[-2:]  # sizes, failed
    limit = type(spelling).max_launch_parameters
    if len(params) > limit:
        raise BrazeError(f"combo {name}: {len(params)} parameters ({len(plan)} buffers, sizes, failed) exceed "
                         f"{spelling.language}'s {limit} per launch; braze-combo-kernels' max-arguments keeps "
                         "combos within it")
    threads = max(r.threads for r in renderers)
    count = len(renderers)
    lines = [f"{spelling.launch_prefix(threads)} {name}({', '.join(spelling.launch_parameters(params))}) {{"]
    words = max(r.shared_words for r in renderers)
    if words:
        lines.append(f"  {spelling.shared_space} int64_t bz_shared[{words}];")
    lines.append(f"  const int64_t bz_block = (int64_t){spelling.block_id};")
    lines.append(f"  const int64_t bz_thread = (int64_t){spelling.local_id};")
    calls, offset = [], count
    for k, (renderer, spec) in enumerate(zip(renderers, specs)):
        arguments = [names[p] for p in passed[k]] + [f"sizes + {offset}", "failed"]
        if renderer.shared:
            arguments.append("bz_shared")
        calls.append(lambda item, r=renderer, arguments=arguments:
                     f"{r.a.name}({', '.join(arguments + [item, 'bz_thread'])});")
        offset += spec.size_count
    if dispatch == "sequential":
        lines.append("  const int64_t bz_end0 = sizes[0];")
        for k in range(1, count):
            lines.append(f"  const int64_t bz_end{k} = bz_end{k - 1} + sizes[{k}];")
        for k in range(count):
            keyword = "if" if k == 0 else "else if"
            item = "bz_block" if k == 0 else f"bz_block - bz_end{k - 1}"
            lines.append(f"  {keyword} (bz_block < bz_end{k}) {calls[k](item)}")
    else:
        if dispatch == "round_robin":
            lines.append(f"  const int64_t bz_which = bz_block % {count}, bz_item = bz_block / {count};")
        else:  # flattened; the host launches no block when every count is 0, so bz_most > 0
            lines.append("  int64_t bz_most = sizes[0];")
            for k in range(1, count):
                lines.append(f"  bz_most = bz_most > sizes[{k}] ? bz_most : sizes[{k}];")
            lines.append("  const int64_t bz_which = bz_block / bz_most, bz_item = bz_block % bz_most;")
        for k in range(count):
            keyword = "if" if k == 0 else "else if"
            lines.append(f"  {keyword} (bz_which == {k} && bz_item < sizes[{k}]) {calls[k]('bz_item')}")
    lines.append("}")
    return "\n".join(lines), plan
