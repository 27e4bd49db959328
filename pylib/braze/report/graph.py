"""The dataflow graph of one function as a Graphviz picture: ops as nodes,
kernels as boxes around the ops they compute, refused fusions as red
dashed edges that carry the pass's reason.

`function_graph` reads the IR (text, as the pipeline recorded it);
`to_dot` spells a graph in DOT; `render_svg` runs Graphviz's `dot`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field

from braze.errors import format_location

# Ops that hold constants, parameters and sizes: not drawn, to keep the
# picture about the computation.
_HIDDEN = {"braze.parameter", "braze.constant", "arith.constant", "tensor.dim", "braze.dim"}
# Ops whose region is one box of the picture, and the kind of box (the CSS
# class and the legend's word). Grouping ops of later passes add theirs.
BOX_KINDS = {"braze.group": "kernel"}
# Graphviz's layout program.
DOT = "dot"
# A fusion pass's refusal: "'consumer' not fused with its producer 'producer': why".
_REFUSAL = re.compile(r"^'([^']+)' not fused with its producer '([^']+)': (.+)$")


@dataclass
class Node:
    id: str
    op: str  # the op's name, or "input" / "output"
    label: str
    location: str = ""  # as messages print it (file:line:col)
    printed: str = ""  # the location attribute as the IR prints it
    box: int | None = None  # index into Graph.boxes


@dataclass
class Box:
    kind: str
    location: str  # its op's location, as printed (kernels are matched by it)
    label: str = ""
    anchor: str = ""  # the page's anchor of what the box stands for


@dataclass
class Edge:
    source: str
    target: str
    refused: str | None = None  # the reason a fusion along this edge was refused


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    # The function's top-level ops in program order: a Box's index, or a Node.
    order: list = field(default_factory=list)


def _short(type_) -> str:
    text = str(type_)
    return text[len("tensor<"):-1] if text.startswith("tensor<") else text


def function_graph(text: str, function: str) -> Graph:
    """The graph of `@function` in the module `text`."""
    from braze.ir import parse

    module = parse(text)
    func = next(op for op in module.mlir_module.body.operations
                if op.operation.name == "func.func" and op.attributes["sym_name"].value == function)
    graph = Graph()
    producer: dict = {}  # ir.Value -> node id
    for number, argument in enumerate(func.regions[0].blocks[0].arguments):
        node = Node(f"arg{number}", "input", f"%arg{number}\n{_short(argument.type)}")
        graph.nodes[node.id] = node
        producer[argument] = node.id
    _add_block(graph, func.regions[0].blocks[0], producer, None)
    return graph


def _add_block(graph: Graph, block, producer: dict, box: int | None) -> list:
    """Adds `block`'s ops (inside `box`, if any); returns the values its
    braze.yield yields."""
    for op in block.operations:
        name = op.operation.name
        if name in _HIDDEN:
            continue
        if name in BOX_KINDS:
            graph.boxes.append(Box(BOX_KINDS[name], str(op.operation.location)))
            graph.order.append(len(graph.boxes) - 1)
            inner = op.regions[0].blocks[0]
            for argument, operand in zip(inner.arguments, op.operation.operands):
                if operand in producer:
                    producer[argument] = producer[operand]
            yielded = _add_block(graph, inner, producer, len(graph.boxes) - 1)
            for result, value in zip(op.operation.results, yielded):
                if value in producer:
                    producer[result] = producer[value]
            continue
        if name in ("braze.yield", "func.return"):
            if name == "braze.yield":
                return list(op.operation.operands)
            node = Node("output", "output", "return")
        else:
            results = ", ".join(_short(r.type) for r in op.operation.results)
            node = Node(f"op{len(graph.nodes)}", name, f"{name.removeprefix('braze.')}\n{results}",
                        format_location(op.operation.location), str(op.operation.location), box)
        graph.nodes[node.id] = node
        if box is None:
            graph.order.append(node)
        for operand in op.operation.operands:
            if operand in producer:
                graph.edges.append(Edge(producer[operand], node.id))
        for result in op.operation.results:
            producer[result] = node.id
    return []


def mark_refusals(graph: Graph, remarks: list[tuple[str, str]]) -> list[tuple[str, str, str, str, bool]]:
    """Marks the edges the fusion remarks refused; returns every refusal as
    (location, consumer, producer, reason, drawn)."""
    refusals = []
    for location, message in remarks:
        match = _REFUSAL.match(message)
        if not match:
            continue
        consumer, producer, reason = match.groups()
        drawn = False
        for edge in graph.edges:
            target, source = graph.nodes[edge.target], graph.nodes[edge.source]
            if target.op == consumer and target.location == location and source.op == producer:
                edge.refused = reason
                drawn = True
        refusals.append((location, consumer, producer, reason, drawn))
    return refusals


def name_kernels(graph: Graph, kernels: list[tuple[str, str]], kept_ops: set[str]) -> None:
    """Labels each box with the kernel compiled from it. `kernels`: (name,
    location as printed) of the final braze.kernel ops in program order;
    a kernel comes from a box, or from a lone op (one not in `kept_ops`,
    the op names still in the final function) that gets a box of its own.
    braze-lower-kernels keeps the order and the location, so they are
    matched in order by location. A kernel matching nothing gets an empty
    box, so the picture has one box per kernel."""
    candidates = [c for c in graph.order
                  if not isinstance(c, Node) or (c.op.startswith("braze.") and c.op not in kept_ops)]
    position = 0
    for name, location in kernels:
        found = next((index for index in range(position, len(candidates))
                      if (candidates[index].printed if isinstance(candidates[index], Node)
                          else graph.boxes[candidates[index]].location) == location), None)
        if found is None or isinstance(candidates[found], Node):
            graph.boxes.append(Box("kernel", location, name, f"kernel-{name}"))
        if found is None:
            continue
        position = found + 1
        if isinstance(candidates[found], Node):
            candidates[found].box = len(graph.boxes) - 1
        else:
            graph.boxes[candidates[found]].label = name
            graph.boxes[candidates[found]].anchor = f"kernel-{name}"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(graph: Graph, title: str) -> str:
    lines = [f"digraph {_quote(title)} {{",
             '  graph [fontname="Helvetica", fontsize=11, rankdir=TB, nodesep=0.25, ranksep=0.35];',
             '  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", fillcolor="#ffffff", '
             'color="#777777", height=0.3];',
             '  edge [fontname="Helvetica", fontsize=10, color="#888888", arrowsize=0.6];']
    members: dict[int, list[Node]] = {}
    for node in graph.nodes.values():
        members.setdefault(node.box, []).append(node)
    for number, box in enumerate(graph.boxes):
        attributes = [f"id={_quote(box.anchor or f'box-{number}')}", f"class={_quote(box.kind)}",
                      f"label={_quote(box.label)}", 'style="rounded,filled"', 'fillcolor="#e8f0fe"',
                      'color="#3367d6"', 'fontcolor="#1a4aa8"']
        if box.anchor:
            attributes.append(f"href={_quote('#source-' + box.anchor)}")
        lines.append(f"  subgraph cluster_{number} {{ {'; '.join(attributes)};")
        lines += [f"    {_node_line(node)}" for node in members.get(number, [])]
        if not members.get(number):  # keeps an empty box visible
            lines.append(f'    empty_{number} [label="", shape=point, style=invis];')
        lines.append("  }")
    lines += [f"  {_node_line(node)}" for node in members.get(None, [])]
    for edge in graph.edges:
        if edge.refused:
            lines.append(f"  {edge.source} -> {edge.target} [class=\"refused\", color=\"#d93025\", "
                         f"fontcolor=\"#d93025\", style=dashed, penwidth=1.6, label=\"refused\", "
                         f"tooltip={_quote('not fused: ' + edge.refused)}];")
        else:
            lines.append(f"  {edge.source} -> {edge.target};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_line(node: Node) -> str:
    if node.op in ("input", "output"):
        style = 'shape=ellipse, fillcolor="#f1f3f4"'
    else:
        style = 'fillcolor="#ffffff"'
    tooltip = f"{node.op} at {node.location}" if node.location else node.op
    return f"{node.id} [label={_quote(node.label)}, tooltip={_quote(tooltip)}, class=\"op\", {style}];"


def dot_missing() -> str | None:
    """Why the pictures cannot be drawn here (None: they can)."""
    if shutil.which(DOT) is None:
        return f"Graphviz's `{DOT}` is not installed (Debian: apt-get install graphviz)"
    return None


def render_svg(dot: str) -> tuple[str | None, str | None]:
    """(the SVG element, None), or (None, why not)."""
    missing = dot_missing()
    if missing:
        return None, missing
    try:
        run = subprocess.run([DOT, "-Tsvg"], input=dot, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, "Graphviz's dot took longer than 120 s"
    if run.returncode != 0:
        return None, f"Graphviz's dot failed: {run.stderr.strip()}"
    return run.stdout[run.stdout.index("<svg"):], None
