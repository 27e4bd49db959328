"""A `braze.combo` in C++: one OpenMP parallel region for all its sub-kernels.

`<name>(void* const* buffers, const int64_t* sizes)`: `buffers` holds each
sub-kernel's inputs then results, sub-kernel after sub-kernel; `sizes` each
sub-kernel's own sizes array (see codegen/cpp/emitter.py), one after the
other. It returns nonzero when a sub-kernel divided an integer by zero.

Every sub-kernel is a static function running a range of its work items
(`CppRenderer.render(block)`). The combo's dispatch places every work item
of every sub-kernel at a position in one sequence, measured in cost units:
item i of sub-kernel k starts at `base[k] + i * step[k]`

* sequential: `base[k]` = the cost of all items of sub-kernels before k,
  `step[k]` = `cost[k]`;
* round_robin: `base[k]` = the costs of sub-kernels before k in one round,
  `step[k]` = the cost of a round (one item of each);
* flattened: `base[k]` = `k * M` (M the most items of a sub-kernel),
  `step[k]` = 1: every item one slot, whatever its cost.

Thread t of T takes the items starting in `[total * t / T, total * (t+1) / T)`:
a static split by estimated cost, computed once per call from the sizes
(dynamic extents included), in one parallel region with no barrier between
sub-kernels.
"""

from __future__ import annotations

from braze.codegen.analysis import KernelSpec, combo_kernels, combo_schedules
from braze.codegen.cpp.emitter import PARALLEL_THRESHOLD  # below it (all points), one thread


def sub_kernel_blocks(combos) -> dict:
    """Kernel op -> the `block` of its work items, for every sub-kernel."""
    blocks = {}
    for combo in combos:
        for kernel, schedule in zip(combo_kernels(combo), combo_schedules(combo)):
            blocks[kernel] = schedule.block
    return blocks


def _extent(spec: KernelSpec, dim: int, sizes: str) -> str:
    size = spec.static_domain[dim]
    return str(size) if size is not None else f"{sizes}[{dim}]"


def render_combo(name: str, combo, specs: list[KernelSpec]) -> str:
    schedules = combo_schedules(combo)
    dispatch = combo.attributes["dispatch"].value
    count = len(specs)
    lines = [f'extern "C" int {name}(void* const* buffers, const int64_t* sizes) {{']
    buffer_offset, size_offset = 0, 0
    calls = []
    for k, (spec, schedule) in enumerate(zip(specs, schedules)):
        sizes = f"(sizes + {size_offset})"
        parallel = [d for d in range(len(spec.static_domain)) if d not in spec.reduce]
        blocked = " * ".join(_extent(spec, d, sizes) for d in parallel) or "1"
        every = " * ".join(_extent(spec, d, sizes) for d in range(len(spec.static_domain))) or "1"
        lines.append(f"  const int64_t items{k} = (({blocked}) + {schedule.block - 1}) / {schedule.block};")
        lines.append(f"  const int64_t points{k} = {every};")
        calls.append((spec.name, buffer_offset, size_offset))
        buffer_offset += len(spec.input_types) + len(spec.result_types)
        size_offset += spec.size_count
    points = " + ".join(f"points{k}" for k in range(count))
    if dispatch == "sequential":
        at = "0"
        for k, schedule in enumerate(schedules):
            lines.append(f"  const int64_t base{k} = {at}, step{k} = {schedule.cost};")
            at = f"base{k} + items{k} * {schedule.cost}"
        lines.append(f"  const int64_t total = {at};")
    elif dispatch == "round_robin":
        round_cost = sum(s.cost for s in schedules)
        at = 0
        for k, schedule in enumerate(schedules):
            lines.append(f"  const int64_t base{k} = {at}, step{k} = {round_cost};")
            at += schedule.cost
        lines.append(f"  const int64_t total = items0 * {round_cost};")
    else:  # flattened
        most = "0"
        for k in range(count):
            most = f"std::max<int64_t>({most}, items{k})"
        lines.append(f"  const int64_t most = {most};")
        for k in range(count):
            lines.append(f"  const int64_t base{k} = {k} * most, step{k} = 1;")
        lines.append(f"  const int64_t total = {count} * most;")
    lines.append("  int failed = 0;")
    lines.append(f"  #pragma omp parallel reduction(|:failed) if(({points}) >= {PARALLEL_THRESHOLD})")
    lines.append("  {")
    lines.append("    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();")
    lines.append("    const int64_t low = total * thread / threads, high = total * (thread + 1) / threads;")
    for k, (function, buffers, sizes) in enumerate(calls):
        lines.append(f"    const int64_t first{k} = bz_item_at(low, base{k}, step{k}, items{k});")
        lines.append(f"    const int64_t end{k} = bz_item_at(high, base{k}, step{k}, items{k});")
        lines.append(f"    if (first{k} < end{k})")
        lines.append(f"      failed |= {function}(buffers + {buffers}, sizes + {sizes}, first{k}, end{k});")
    lines.append("  }")
    lines.append("  return failed;")
    lines.append("}")
    return "\n".join(lines)


# The first item (of `count`, item i at `base + i * step`) at or after `at`.
ITEM_AT = """static inline int64_t bz_item_at(int64_t at, int64_t base, int64_t step, int64_t count) {
  return at <= base ? 0 : std::min<int64_t>(count, (at - base + step - 1) / step);
}"""
