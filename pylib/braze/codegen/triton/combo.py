"""A `braze.combo` in Triton: one `@triton.jit` launch function over a 1-D
grid whose program ids are the work items of all sub-kernels.

Its parameters are every sub-kernel's parameters (codegen/triton/emitter.py's
order), prefixed `k<j>_`. Each program finds its sub-kernel and item from
`tl.program_id(0)` by the combo's dispatch, and calls that sub-kernel's
function with the item as `pid` and the sub-kernel's own blocks (`XBLOCK` =
its schedule's `block`, `RBLOCK` = its `rblock` when it loops over the
reduction) as constants:

* sequential: sub-kernel k owns ids [start_k, start_k + items_k);
* round_robin: id = item * K + k;
* flattened: id = k * M + item (M the most items of a sub-kernel); ids past
  a sub-kernel's items do nothing.

The grid (runtime/triton.py, `runtime/combo.py: launch_size`) is one axis: no y-grid, whose 65535 limit a
large combo would pass. Every store stays masked as in a standalone kernel.
"""

from __future__ import annotations

from braze.codegen.analysis import KernelSpec, combo_schedules

def sub_kernel_parameters(spec: KernelSpec) -> list[str]:
    """A sub-kernel's runtime parameters, in its function's order (the
    launch function takes them prefixed)."""
    params = [f"in{n}" for n in range(len(spec.input_types))]
    params += [f"out{n}" for n in range(len(spec.result_types))]
    if spec.can_fail:
        params.append("failed")
    params += [f"n{d}" for d, size in enumerate(spec.static_domain) if size is None]
    params += [f"s{n}_{d}" for n, t in enumerate(spec.input_types) for d in range(t.rank)]
    return params


def _items(spec: KernelSpec, prefix: str, block: int) -> str:
    """The sub-kernel's work items, as an int64 scalar."""
    factors = []
    for dim, size in enumerate(spec.static_domain):
        if dim in spec.reduce:
            continue
        factors.append(f"{prefix}n{dim}" if size is None else str(size))
    points = " * ".join(factors) or "1"
    return f"tl.cdiv(tl.full([], 0, tl.int64) + {points}, {block})"


def render_combo(name: str, combo, specs: list[KernelSpec]) -> str:
    schedules = combo_schedules(combo)
    dispatch = combo.attributes["dispatch"].value
    count = len(specs)
    params, lines, calls = [], [], []
    for k, (spec, schedule) in enumerate(zip(specs, schedules)):
        own = sub_kernel_parameters(spec)
        params += [f"k{k}_{p}" + (": tl.int64" if p[0] in "ns" and p != "failed" else "") for p in own]
        lines.append(f"    items{k} = {_items(spec, f'k{k}_', schedule.block)}")
        blocks = [str(schedule.block)] + ([str(schedule.rblock)] if spec.strategy == "looped" else []) + ["INDEX"]
        calls.append(lambda item, k=k, own=own, spec=spec, blocks=blocks:
                     f"{spec.name}({', '.join([f'k{k}_{p}' for p in own] + [item] + blocks)})")
    lines.append("    program = tl.program_id(0).to(tl.int64)")
    if dispatch == "sequential":
        start = "0"
        for k in range(count):
            keyword = "if" if k == 0 else "elif"
            end = f"items{k}" if start == "0" else f"{start} + items{k}"
            lines.append(f"    {keyword} program < {end}:")
            lines.append(f"        {calls[k]('program' if start == '0' else f'program - ({start})')}")
            start = end
    elif dispatch == "round_robin":
        lines.append(f"    item = program // {count}")
        for k in range(count):
            keyword = "if" if k == 0 else "elif"
            lines.append(f"    {keyword} program % {count} == {k}:")
            lines.append(f"        {calls[k]('item')}")
    else:  # flattened
        lines.append("    most = items0")
        for k in range(1, count):
            lines.append(f"    most = tl.maximum(most, items{k})")
        lines.append("    item = program % most")
        for k in range(count):
            keyword = "if" if k == 0 else "elif"
            lines.append(f"    {keyword} (program // most == {k}) & (item < items{k}):")
            lines.append(f"        {calls[k]('item')}")
    params.append("INDEX: tl.constexpr")
    return "\n".join(["@triton.jit", f"def {name}({', '.join(params)}):"] + lines)

