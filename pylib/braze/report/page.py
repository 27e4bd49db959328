"""The report's HTML: one self-contained page (inline CSS and SVG, no
script), built from `CompileFacts` section by section. A section is a
function of the facts that returns its HTML, or None when it has nothing to
show; `SECTIONS` lists them in page order (a new section is one more
function there)."""

from __future__ import annotations

from html import escape

_STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 2em 3em; color: #202124; }
h1 { font-size: 20px; margin: 1em 0 .3em; } h2 { font-size: 17px; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.bar { background: #8ab4f8; height: 10px; display: inline-block; }
.graphs { display: flex; flex-wrap: wrap; gap: 2em; align-items: flex-start; }
.graph { overflow: auto; max-width: 100%; } .graph svg { max-width: 100%; height: auto; }
.note { background: #fef7e0; border: 1px solid #f9ab00; padding: .4em .8em; }
.refused { color: #d93025; } pre { background: #f8f9fa; padding: .6em; overflow: auto; font-size: 12px; }
summary { cursor: pointer; font-family: monospace; }
.legend span { display: inline-block; padding: 0 .5em; margin-right: .4em; border: 1px solid; border-radius: 4px; }
.legend .kernel { background: #e8f0fe; border-color: #3367d6; }
.legend .combo { background: #e6f4ea; border-color: #188038; }
.legend .fused-gemm { background: #fef7e0; border-color: #e37400; }
.legend .control { background: #f3e8fd; border-color: #8430ce; }
.legend .extern { background: #fff4e5; border-color: #e37400; border-style: dashed; }
.legend .collective { background: #f3e8fd; border-color: #8430ce; }
svg.timeline { display: block; margin: .3em 0 1em; font: 11px system-ui, sans-serif; }
svg.timeline .lane { fill: #f8f9fa; } svg.timeline .lane-label { text-anchor: end; fill: #3c4043; }
svg.timeline .span { stroke: #ffffff; stroke-width: .5; }
svg.timeline .span-label { fill: #202124; pointer-events: none; }
svg.timeline .kernel { fill: #8ab4f8; } svg.timeline .library { fill: #fdd663; }
svg.timeline .extern { fill: #fbbc04; } svg.timeline .control { fill: #c58af9; }
svg.timeline .host { fill: #bdc1c6; } svg.timeline .collective { fill: #81c995; }
svg.timeline .wait { fill: #f28b82; opacity: .55; } svg.timeline .axis { stroke: #80868b; }
svg.timeline .tick { text-anchor: middle; fill: #5f6368; }
"""


def _table(header: list[str] | None, rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    head = "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f'<td class="n">{cell}</td>' if index in numeric else f"<td>{cell}</td>"
                                    for index, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _count(value: int | None) -> str:
    return "dynamic" if value is None else f"{value:,}"


def summary(facts) -> str:
    rows = [["function", escape(facts.function)], ["target", escape(facts.target)],
            ["kernels", str(len(facts.kernels))],
            ["library calls (GEMM, convolution, attention)", str(facts.library_calls)],
            ["extern aten calls", escape(", ".join(f"{op} ×{n}" for op, n in facts.extern_ops.items()) or "none")],
            ["compile time", f"{facts.compile_seconds * 1e3:.0f} ms"],
            ["kernel binary", "no kernels" if facts.cache_hit is None else
             ("cache hit" if facts.cache_hit else "cache miss (compiled now)")],
            ["source", escape(str(facts.source_path or "-"))]]
    return "<h2>Summary</h2>" + _table(None, rows)


def graphs(facts) -> str:
    parts = ["<h2>Graph</h2>",
             '<p class="legend">Ops as nodes, fusions the pass refused as <span class=refused>red dashed '
             "edges</span> (hover for the reason); boxes: <span class=kernel>kernel</span> (labelled with its "
             "name; click for its source) <span class=combo>combo</span> (kernels started as one launch, with "
             "its dispatch and each sub-kernel's schedule) <span class=fused-gemm>fused GEMM</span> "
             "<span class=control>switch / while</span> (a box per region); nodes: "
             "<span class=collective>collective</span> <span class=extern>extern aten call</span>. "
             "Parameters and constants are not drawn.</p>"]
    if facts.graph_problem:
        parts.append(f'<p class="note">No pictures: {escape(facts.graph_problem)}. The graphs in DOT follow; '
                     f"render them with <code>dot -Tsvg</code>.</p>")
    parts.append('<div class="graphs">')
    for anchor, title, svg, dot in facts.pictures:
        body = svg if svg is not None else f"<details><summary>DOT</summary><pre>{escape(dot)}</pre></details>"
        parts.append(f'<div class="graph" id="{anchor}"><h3>{escape(title)}</h3>{body}</div>')
    parts.append("</div>")
    return "".join(parts)


def fusion(facts) -> str | None:
    if facts.fused is None and facts.epilogues is None:
        return None
    rows = [[escape(pass_name), escape(location), escape(consumer or "-"), escape(producer), escape(reason),
             "-" if drawn is None else "yes" if drawn else "no (an op not found in the picture)"]
            for pass_name, location, consumer, producer, reason, drawn in facts.refusals]
    said = []
    if facts.epilogues is not None:
        gemms, taken = facts.epilogues
        own = [row for row in facts.refusals if row[0] == "braze-epilogue-fusion"]
        alone = sum(not consumer for _, _, consumer, *_ in own)
        said.append(f"braze-epilogue-fusion made {gemms} fused GEMM(s) of {taken} op(s) besides their products, "
                    f"left {alone} GEMM(s) without an epilogue and refused {len(own) - alone} op(s).")
    if facts.fused is not None:
        refused = sum(row[0] == "braze-fuse-pointwise" for row in facts.refusals)
        said.append(f"braze-fuse-pointwise fused {facts.fused} producer/consumer pair(s) and refused {refused}.")
    text = f"<h2>Fusion decisions</h2><p>{' '.join(said)}</p>"
    if rows:
        text += _table(["pass", "at", "consumer", "producer", "why not fused", "drawn"], rows)
    return text


def combos(facts) -> str | None:
    if facts.combo_decisions is None:
        return None
    grouped = "".join(
        f'<li id="launch-{escape(combo.launch)}"><code>{escape(combo.launch)}</code>, dispatch '
        f"{escape(combo.dispatch)}: "
        + ", ".join(f"{escape(name)} ({escape(schedule)})" for name, schedule in combo.members) + "</li>"
        for combo in facts.combos)
    rows = [[escape(kernel), escape(launch or "standalone"), "<br>".join(escape(m) for m in messages)]
            for kernel, launch, messages in facts.combo_decisions]
    text = (f"<h2>Combo decisions</h2><p>braze-combo-kernels made {len(facts.combos)} combo(s) of "
            f"{sum(len(c.members) for c in facts.combos)} kernels.</p>")
    if grouped:
        text += f"<ul>{grouped}</ul>"
    if rows:
        text += _table(["kernel", "launch", "what the pass decided"], rows)
    return text


def timeline(facts) -> str | None:
    if not facts.timelines:
        return None
    machine = facts.machine
    parts = ["<h2>Collective schedule</h2>",
             "<p>One lane for compute and one per process group; red: the compute lane waits for a "
             "collective. Estimated from each op's bytes and flops (dynamic dims as 1) on "
             f"{machine.memory_bandwidth / 1e9:g} GB/s memory, {machine.peak_flops / 1e12:g} TFLOP/s, links of "
             f"{machine.link_bandwidth / 1e9:g} GB/s and {machine.link_latency * 1e6:g} µs (the option "
             "<code>report_machine</code>). Hover a block for its estimate.</p>"]
    if facts.timeline_note:
        parts.append(f'<p class="note">{escape(facts.timeline_note)}</p>')
    for anchor, schedule, svg in facts.timelines:
        parts.append(f"<h3>{escape(schedule.title)}: {schedule.seconds * 1e6:,.2f} µs, "
                     f"{schedule.collectives} collective(s) for {schedule.communicating * 1e6:,.2f} µs, "
                     f"compute waiting {schedule.waiting * 1e6:,.2f} µs</h3>{svg}")
    return "".join(parts)


def decisions(facts) -> str | None:
    if not facts.decisions:
        return None
    parts = ["<h2>Other decisions</h2><p>What the other passes explained (their remarks).</p>"]
    for pass_name, remarks in facts.decisions.items():
        parts.append(f"<h3>{escape(pass_name)}</h3>"
                     + _table(["at", "what the pass said"],
                              [[escape(r.location), escape(r.message)] for r in remarks]))
    return "".join(parts)


def kernels(facts) -> str | None:
    if not facts.kernels:
        return None
    rows = []
    for kernel in facts.kernels:
        intensity = "-" if not kernel.bytes or kernel.flops is None else f"{kernel.flops / kernel.bytes:.2f}"
        rows.append([f'<a href="#source-kernel-{escape(kernel.name)}">{escape(kernel.name)}</a>',
                     escape(kernel.launch or "-"), escape(kernel.domain), _count(kernel.bytes),
                     _count(kernel.flops), intensity,
                     escape(", ".join(kernel.inputs)) + " → " + escape(", ".join(kernel.results)),
                     escape(kernel.location)])
    sources = "".join(
        f'<details class="kernel-source" id="source-kernel-{escape(k.name)}"><summary>{escape(k.name)}</summary>'
        f"<pre>{escape(k.source)}</pre></details>" for k in facts.kernels)
    return ("<h2>Kernels</h2><p>Estimated bytes: every input read and every result written once; estimated "
            "flops: the scalar body's arithmetic ops times the domain's points.</p>"
            + _table(["kernel", "launch", "domain", "bytes (est.)", "flops (est.)", "flops/byte",
                      "operands → results", "at"], rows, numeric={3, 4, 5})
            + f"<h3>Generated source ({escape(facts.target)})</h3>" + sources)


def passes(facts) -> str | None:
    if not facts.passes:
        return None
    longest = max(run.seconds for run in facts.passes) or 1.0
    rows = [[escape(run.pipeline), f"{run.seconds * 1e3:.2f}",
             f'<span class="bar" style="width:{120 * run.seconds / longest:.0f}px"></span>',
             f"{run.ops_before} → {run.ops_after}"] for run in facts.passes]
    total = sum(run.seconds for run in facts.passes)
    return (f"<h2>Passes</h2><p>{len(rows)} passes, {total * 1e3:.1f} ms in all.</p>"
            + _table(["pass", "ms", "", "ops before → after"], rows, numeric={1}))


SECTIONS = [summary, graphs, fusion, combos, timeline, decisions, kernels, passes]


def render(facts) -> str:
    body = "".join(part for part in (section(facts) for section in SECTIONS) if part)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>braze report: @{escape(facts.function)} ({escape(facts.target)})</title>"
            f"<style>{_STYLE}</style></head><body><h1>braze compile report: @{escape(facts.function)}</h1>"
            f"{body}</body></html>\n")
