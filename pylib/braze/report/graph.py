"""The dataflow graph of one function as a Graphviz picture: ops as nodes,
kernels, combos, fused GEMMs and control-flow regions as boxes around what
they hold, collectives and extern calls marked as such, refused fusions as
red dashed edges that carry the pass's reason.

`function_graph` reads the IR (text, as the pipeline recorded it);
`name_kernels` and `group_combos` bring in what later passes decided (the
kernels' names, the combos); `to_dot` spells a graph in DOT; `render_svg`
runs Graphviz's `dot`.
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
# What ends a region's block (its operands are what the region yields).
_TERMINATORS = {"braze.yield", "braze.combo_yield", "braze.gemm_yield"}
# Ops whose region is a scalar body, not a graph: one node each.
_OPAQUE = {"braze.kernel"}
COLLECTIVES = {"braze.all_reduce_start", "braze.all_gather_start", "braze.reduce_scatter_start",
               "braze.all_to_all_start", "braze.broadcast_start", "braze.wait"}


@dataclass(frozen=True)
class BoxKind:
    """How an op with regions is drawn: a box (`kind` is its CSS class and
    the legend's word) around its regions' ops. `head` is the op's own node
    inside the box: "merge" (its results; it reads the operands no region
    takes and what each region yields, as a switch picks a branch's
    values), "product" (a fused GEMM's matrix product, feeding the
    epilogue's first argument) or None (the results are what the region
    yields). `parts` names the sub-box of each region when there are
    several (None: "region N")."""

    kind: str
    head: str | None = "merge"
    parts: tuple[str, ...] | str | None = None

    def part(self, number: int) -> str:
        if isinstance(self.parts, tuple):
            return self.parts[number] if number < len(self.parts) else f"region {number}"
        return f"{self.parts or 'region'} {number}"


# Ops whose regions are drawn as boxes. An op with regions that is not
# listed gets a box of its own name (kind) with a merge head, so a new
# grouping op shows up before it has an entry here.
BOX_KINDS = {
    "braze.group": BoxKind("kernel", head=None),
    "braze.fused_gemm": BoxKind("fused-gemm", head="product"),
    "braze.switch": BoxKind("switch", parts="branch"),
    "braze.while": BoxKind("while", parts=("condition", "body")),
}
# Graphviz's layout program.
DOT = "dot"
# A fusion pass's refusal, as (consumer, producer, why[, the producer's
# location]): braze-fuse-pointwise's "'consumer' not fused with its
# producer 'producer': why" and braze-epilogue-fusion's "'op' not fused into
# the epilogue of 'gemm': why (the GEMM at loc(...))" (the op may read the
# product through others, so the GEMM is named by its place) and, naming
# no consumer, "'gemm' not fused with an epilogue: why".
_REFUSALS = (re.compile(r"^'([^']+)' not fused with its producer '([^']+)': (.+)$"),
             re.compile(r"^'([^']+)' not fused into the epilogue of '([^']+)': (.+) \(the GEMM at (loc\(.+\))\)$"),
             re.compile(r"^()'([^']+)' not fused with an epilogue: (.+)$"))
# Where the first of an op's places is (a fused location's first).
_FIRST_PLACE = re.compile(r'"([^"]*)":(\d+):(\d+)')


@dataclass
class Node:
    id: str
    op: str  # the op's name, or "input" / "output"
    label: str
    location: str = ""  # as messages print it (file:line:col)
    printed: str = ""  # the location attribute as the IR prints it
    box: int | None = None  # index into Graph.boxes: the innermost box holding it
    kind: str = "op"  # CSS class: op, collective, extern, head, input, output


@dataclass
class Box:
    kind: str
    location: str  # its op's location, as printed (kernels are matched by it)
    label: str = ""
    anchor: str = ""  # its id in the picture (kernel-<name>, combo-<launch>)
    parent: int | None = None  # the box holding this one
    href: str = ""  # where clicking it leads on the page


@dataclass
class Edge:
    source: str
    target: str
    refused: str | None = None  # the reason a fusion along this edge was refused
    # False: no value flows along it (an epilogue refusal of an op that reads
    # the product through others), so it does not shape the layout.
    dataflow: bool = True


@dataclass
class Graph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    # The function's ops in program order, each region's right after its
    # op (the order kernels are named in): a Box's index, or a Node.
    order: list = field(default_factory=list)


def _short(type_) -> str:
    text = str(type_)
    return text[len("tensor<"):-1] if text.startswith("tensor<") else text


def find_function(module, function: str):
    """The func.func `@function` of `module` (a braze.Module, which must
    outlive what this returns)."""
    return next(op for op in module.mlir_module.body.operations
                if op.operation.name == "func.func" and op.attributes["sym_name"].value == function)


def function_graph(text: str, function: str) -> Graph:
    """The graph of `@function` in the module `text`."""
    from braze.ir import parse

    module = parse(text)
    func = find_function(module, function)
    graph = Graph()
    producer: dict = {}  # ir.Value -> node id
    for number, argument in enumerate(func.regions[0].blocks[0].arguments):
        node = Node(f"arg{number}", "input", f"%arg{number}\n{_short(argument.type)}", kind="input")
        graph.nodes[node.id] = node
        producer[argument] = node.id
    _add_block(graph, func.regions[0].blocks[0], producer, None)
    return graph


def _op_node(graph: Graph, op, box: int | None, kind: str = "op") -> Node:
    name = op.operation.name
    results = ", ".join(_short(r.type) for r in op.operation.results)
    label = f"{name.removeprefix('braze.')}\n{results}"
    if name == "braze.extern":
        kind, label = "extern", f"extern {op.attributes['target'].value}\n{results}"
    elif name in COLLECTIVES:
        kind = "collective"
        if name != "braze.wait":
            label = f"{name.removeprefix('braze.')}\ngroup {op.attributes['group'].value}\n{results}"
    node = Node(f"op{len(graph.nodes)}", name, label, format_location(op.operation.location),
                str(op.operation.location), box, kind)
    graph.nodes[node.id] = node
    graph.order.append(node)
    return node


def _connect(graph: Graph, producer: dict, values, target: str) -> None:
    for value in values:
        if value in producer:
            graph.edges.append(Edge(producer[value], target))


def _add_block(graph: Graph, block, producer: dict, box: int | None) -> list:
    """Adds `block`'s ops (inside `box`, if any); returns the values its
    terminator yields."""
    for op in block.operations:
        name = op.operation.name
        if name in _HIDDEN:
            continue
        if name in _TERMINATORS:
            return list(op.operation.operands)
        if len(op.operation.regions) and name not in _OPAQUE:
            _add_region_op(graph, op, producer, box)
            continue
        if name == "func.return":
            node = Node("output", "output", "return", kind="output")
            graph.nodes[node.id] = node
        else:
            node = _op_node(graph, op, box)
        _connect(graph, producer, op.operation.operands, node.id)
        for result in op.operation.results:
            producer[result] = node.id
    return []


def _add_region_op(graph: Graph, op, producer: dict, box: int | None) -> None:
    """An op with regions: its box (a sub-box per region when it has
    several), its regions' ops inside, and its head node (see BoxKind)."""
    name = op.operation.name
    kind = BOX_KINDS.get(name) or BoxKind(name.removeprefix("braze."))
    label = "" if kind.head is None else name.removeprefix("braze.")  # a kernel's name comes later
    graph.boxes.append(Box(kind.kind, str(op.operation.location), label, parent=box))
    outer = len(graph.boxes) - 1
    graph.order.append(outer)
    operands = list(op.operation.operands)
    head = _op_node(graph, op, outer, "head") if kind.head else None
    regions = list(op.operation.regions)
    taken: set = set()
    yielded: list = []  # every region's yielded values, in order
    for number, region in enumerate(regions):
        inner = region.blocks[0]
        arguments = list(inner.arguments)
        inside = outer
        if len(regions) > 1:
            graph.boxes.append(Box("region", str(op.operation.location), kind.part(number), parent=outer))
            inside = len(graph.boxes) - 1
        if kind.head == "product" and arguments:  # the accumulator, then one value per trailing operand
            producer[arguments[0]] = head.id
            feeding = operands[len(operands) - len(arguments) + 1:]
            arguments = arguments[1:]
        else:  # the block arguments stand for the op's trailing operands
            feeding = operands[len(operands) - len(arguments):] if len(arguments) <= len(operands) else []
        for argument, operand in zip(arguments, feeding):
            taken.add(operand)
            if operand in producer:
                producer[argument] = producer[operand]
        yielded += _add_block(graph, inner, producer, inside)
    if head is not None:
        _connect(graph, producer, [v for v in operands if v not in taken], head.id)
    if kind.head == "merge":  # the head picks the results among the regions' yields
        _connect(graph, producer, yielded, head.id)
        for result in op.operation.results:
            producer[result] = head.id
        return
    for result, value in zip(op.operation.results, yielded):  # the yields, region after region
        if value in producer:
            producer[result] = producer[value]


def _first_place(printed: str) -> str | None:
    match = _FIRST_PLACE.search(printed)
    return match and ":".join(match.groups())


def mark_refusals(graph: Graph, remarks: list) -> list[tuple[str, str, str, str, str, bool]]:
    """Marks the edges the fusion passes' `remarks` (pipeline Remarks)
    refused; returns every refusal as (pass, location, consumer, producer,
    reason, drawn); drawn is None when the remark names no consumer. An
    epilogue refusal names its GEMM by place: the GEMM there, or the fused
    GEMM that starts there (its location's first place) once the pass made
    one; when the op does not read the GEMM's result itself, a refused edge
    that carries no value joins them."""
    refusals = []
    for remark in remarks:
        match = next(filter(None, (pattern.match(remark.message) for pattern in _REFUSALS)), None)
        if not match:
            continue
        consumer, producer, reason, producer_at = (*match.groups(), None)[:4]
        if not consumer:
            refusals.append((remark.pass_name, remark.location, "", producer, reason, None))
            continue
        producer_place = producer_at and _first_place(producer_at)
        targets = {node.id for node in graph.nodes.values()
                   if node.op == consumer and node.location == remark.location}
        if producer_place is None:
            sources = {node.id for node in graph.nodes.values() if node.op == producer}
        else:
            sources = {node.id for node in graph.nodes.values()
                       if node.op in (producer, "braze.fused_gemm") and _first_place(node.printed) == producer_place}
        edges = [edge for edge in graph.edges if edge.source in sources and edge.target in targets]
        if not edges and producer_place is not None and len(sources) == len(targets) == 1:
            edges = [Edge(next(iter(sources)), next(iter(targets)), dataflow=False)]
            graph.edges += edges
        for edge in edges:
            edge.refused = reason
        refusals.append((remark.pass_name, remark.location, consumer, producer, reason, bool(edges)))
    return refusals


# The box kind of what each kind of compiled kernel comes from.
_KERNEL_BOXES = {"braze.kernel": "kernel", "braze.fused_gemm": "fused-gemm", "braze.flash_attention": "kernel"}


def name_kernels(graph: Graph, kernels: list[tuple[str, str, str]], kept_ops: set[str]) -> None:
    """Labels each kernel box with the kernel compiled from it. `kernels`:
    (name, location as printed, op name) of the final braze.kernel and
    braze.fused_gemm ops in program order (a region's after its op); a
    braze.kernel comes from a kernel box, or from a lone op (one not in
    `kept_ops`, the op names still in the final function) that gets a box
    of its own; a fused GEMM from its fused-gemm box (the emitter names it
    as a kernel: its source, the codegen log and traces use that name).
    braze-lower-kernels keeps the order and the location, so they are
    matched in order by location. A kernel matching nothing gets an empty
    box, so the picture has one box per kernel."""
    def box_kind(candidate) -> str | None:
        if candidate is None:
            return None
        if isinstance(candidate, int):
            return graph.boxes[candidate].kind
        return "kernel" if candidate.kind == "op" and candidate.op.startswith("braze.") \
            and candidate.op not in kept_ops else None

    candidates = [c for c in graph.order if box_kind(c) in _KERNEL_BOXES.values()]
    position = 0
    for name, location, op_name in kernels:
        kind = _KERNEL_BOXES[op_name]
        found = next((index for index in range(position, len(candidates))
                      if box_kind(candidates[index]) == kind
                      and (candidates[index].printed if isinstance(candidates[index], Node)
                           else graph.boxes[candidates[index]].location) == location), None)
        label = name if kind == "kernel" else f"{name}\nfused GEMM"
        if found is None:
            # A kernel a later pass made of an op this IR still has (a view
            # braze-fold-layouts could not fold is copied by a kernel at
            # its place) is boxed around that op; else its box is empty.
            made_of = next((node for node in graph.order if isinstance(node, Node) and node.kind == "op"
                            and node.printed == location and box_kind(node.box) not in _KERNEL_BOXES.values()),
                           None)
            graph.boxes.append(Box(kind, location, label, f"kernel-{name}", href=f"#source-kernel-{name}",
                                   parent=made_of and made_of.box))
            if made_of is not None:
                made_of.box = len(graph.boxes) - 1
            continue
        position = found + 1
        candidate = candidates[found]
        if isinstance(candidate, Node):
            graph.boxes.append(Box(kind, location, label, f"kernel-{name}", parent=candidate.box,
                                   href=f"#source-kernel-{name}"))
            candidate.box = len(graph.boxes) - 1
        else:
            box = graph.boxes[candidate]
            box.label, box.anchor, box.href = label, f"kernel-{name}", f"#source-kernel-{name}"


def group_combos(graph: Graph, combos: list) -> None:
    """Puts the kernel boxes of each combo (report.kernels.ComboFacts, the
    kernels named by name_kernels) in a combo box labelled with its launch
    and dispatch; each kernel's label gets its schedule (block, rblock,
    cost)."""
    by_anchor = {box.anchor: number for number, box in enumerate(graph.boxes) if box.kind == "kernel"}
    for combo in combos:
        members = [(by_anchor[f"kernel-{name}"], schedule) for name, schedule in combo.members
                   if f"kernel-{name}" in by_anchor]
        if not members:
            continue
        graph.boxes.append(Box("combo", "", f"combo {combo.launch}\ndispatch {combo.dispatch}",
                               f"combo-{combo.launch}", parent=graph.boxes[members[0][0]].parent,
                               href=f"#launch-{combo.launch}"))
        for number, schedule in members:
            graph.boxes[number].parent = len(graph.boxes) - 1
            graph.boxes[number].label += "\n" + schedule


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# Per box kind: fill, border and label colours (other kinds: grey).
_BOX_COLOURS = {
    "kernel": ("#e8f0fe", "#3367d6", "#1a4aa8"),
    "combo": ("#e6f4ea", "#188038", "#137333"),
    "fused-gemm": ("#fef7e0", "#e37400", "#b06000"),
    "switch": ("#f3e8fd", "#8430ce", "#681da8"),
    "while": ("#f3e8fd", "#8430ce", "#681da8"),
    "region": ("#ffffff", "#a142f4", "#681da8"),
}
# Per node kind: its DOT style.
_NODE_STYLES = {
    "op": 'fillcolor="#ffffff"',
    "head": 'fillcolor="#eeeeee", penwidth=1.4',
    "input": 'shape=ellipse, fillcolor="#f1f3f4"',
    "output": 'shape=ellipse, fillcolor="#f1f3f4"',
    "collective": 'shape=cds, style="filled", fillcolor="#f3e8fd", color="#8430ce"',
    "extern": 'style="rounded,filled,dashed", fillcolor="#fff4e5", color="#e37400", penwidth=1.4',
}


def to_dot(graph: Graph, title: str) -> str:
    lines = [f"digraph {_quote(title)} {{",
             '  graph [fontname="Helvetica", fontsize=11, rankdir=TB, nodesep=0.25, ranksep=0.35];',
             '  node [fontname="Helvetica", fontsize=10, shape=box, style="rounded,filled", fillcolor="#ffffff", '
             'color="#777777", height=0.3];',
             '  edge [fontname="Helvetica", fontsize=10, color="#888888", arrowsize=0.6];']
    members: dict[int | None, list[Node]] = {}
    for node in graph.nodes.values():
        members.setdefault(node.box, []).append(node)
    children: dict[int | None, list[int]] = {}
    for number, box in enumerate(graph.boxes):
        children.setdefault(box.parent, []).append(number)

    def cluster(number: int, indent: str) -> None:
        box = graph.boxes[number]
        fill, border, text = _BOX_COLOURS.get(box.kind, ("#f8f9fa", "#5f6368", "#3c4043"))
        attributes = [f"id={_quote(box.anchor or f'box-{number}')}", f"class={_quote(box.kind)}",
                      f"label={_quote(box.label)}", 'style="rounded,filled"', f'fillcolor="{fill}"',
                      f'color="{border}"', f'fontcolor="{text}"']
        if box.href:
            attributes.append(f"href={_quote(box.href)}")
        lines.append(f"{indent}subgraph cluster_{number} {{ {'; '.join(attributes)};")
        lines.extend(f"{indent}  {_node_line(node)}" for node in members.get(number, []))
        for child in children.get(number, []):
            cluster(child, indent + "  ")
        if not members.get(number) and not children.get(number):  # keeps an empty box visible
            lines.append(f'{indent}  empty_{number} [label="", shape=point, style=invis];')
        lines.append(f"{indent}}}")

    for number in children.get(None, []):
        cluster(number, "  ")
    lines += [f"  {_node_line(node)}" for node in members.get(None, [])]
    for edge in graph.edges:
        if edge.refused:
            lines.append(f"  {edge.source} -> {edge.target} [class=\"refused\", color=\"#d93025\", "
                         f"fontcolor=\"#d93025\", style=dashed, penwidth=1.6, label=\"refused\", "
                         f"tooltip={_quote('not fused: ' + edge.refused)}"
                         f"{'' if edge.dataflow else ', constraint=false'}];")
        else:
            lines.append(f"  {edge.source} -> {edge.target};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_line(node: Node) -> str:
    tooltip = f"{node.op} at {node.location}" if node.location else node.op
    classes = "op" if node.kind == "op" else f"op {node.kind}"
    return (f"{node.id} [label={_quote(node.label)}, tooltip={_quote(tooltip)}, class={_quote(classes)}, "
            f"{_NODE_STYLES[node.kind]}];")


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
