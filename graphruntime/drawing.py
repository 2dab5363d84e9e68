"""Pictures of a graph: Graphviz dot, SVG (through Graphviz's `dot` program) and plain text.

Drawing works from the parsed config alone, so a graph whose calculators are not installed (or
that does not validate yet) can still be looked at. Calculators are boxes, graph inputs and outputs
are ovals, side packets are notes with dashed edges, and back edges are drawn dashed in red with
`constraint=false` so they do not distort the top-to-bottom flow.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from graphruntime.config import GraphConfig, SubgraphUse
from graphruntime.errors import GraphError
from graphruntime.tags import TagError, parse_tag_index, parse_tag_index_name


@dataclass
class _Port:
    label: str  # "TAG:0" / "" for an untagged first port
    name: str


@dataclass
class _Node:
    index: int
    title: str
    calculator: str
    inputs: list[_Port] = field(default_factory=list)
    outputs: list[_Port] = field(default_factory=list)
    side_inputs: list[_Port] = field(default_factory=list)
    side_outputs: list[_Port] = field(default_factory=list)
    back_edges: set[str] = field(default_factory=set)  # stream names entering through back edges
    handler: str = ""
    subgraphs: tuple[SubgraphUse, ...] = ()  # the subgraph uses it came from, outermost first


def _ports(specs: list[str]) -> list[_Port]:
    ports: list[_Port] = []
    for spec in specs:
        try:
            parsed = parse_tag_index_name(spec)
        except TagError:
            ports.append(_Port("?", spec))
            continue
        label = parsed.tag if parsed.index <= 0 else f"{parsed.tag}:{parsed.index}"
        ports.append(_Port(label, parsed.name))
    return ports


def _nodes(config: GraphConfig) -> list[_Node]:
    nodes: list[_Node] = []
    for i, node in enumerate(config.proto.node):
        uses = config.subgraphs(i)
        entry = _Node(i, short_name(node.name, uses) or node.calculator, node.calculator)
        entry.subgraphs = uses
        entry.inputs = _ports(list(node.input_stream))
        entry.outputs = _ports(list(node.output_stream))
        entry.side_inputs = _ports([*node.input_side_packet, *node.external_input])
        entry.side_outputs = _ports(list(node.output_side_packet))
        if node.HasField("input_stream_handler"):
            entry.handler = node.input_stream_handler.input_stream_handler
        for info in node.input_stream_info:
            if not info.back_edge:
                continue
            try:
                tag, index = parse_tag_index(info.tag_index)
            except TagError:
                continue
            for spec in node.input_stream:
                try:
                    parsed = parse_tag_index_name(spec)
                except TagError:
                    continue
                if parsed.tag == tag and max(parsed.index, 0) == index:
                    entry.back_edges.add(parsed.name)
        nodes.append(entry)
    return nodes


def short_name(name: str, uses: tuple[SubgraphUse, ...]) -> str:
    """An expanded node's name without the prefix its subgraph uses gave it."""
    if not uses:
        return name
    prefix = _prefix_of(uses[-1].name)
    return name[len(prefix) :] if name.startswith(prefix) else name


def _prefix_of(use_name: str) -> str:
    lowered = use_name.lower()
    for old in ".: ":
        lowered = lowered.replace(old, "_")
    return lowered + "__"


def subgraph_label(use: SubgraphUse) -> str:
    """ "Type (use name)", or the type alone where the using node had no name of its own."""
    return use.type if use.name == use.type else f"{use.type} ({use.name})"


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def to_dot(config: GraphConfig) -> str:
    nodes = _nodes(config)
    proto = config.proto
    lines = [
        "digraph graph_config {",
        "  rankdir=TB;",
        '  node [fontname="Helvetica", fontsize=11];',
        '  edge [fontname="Helvetica", fontsize=9];',
    ]
    producers: dict[str, str] = {}
    for port in _ports(list(proto.input_stream)):
        node_id = f"in_{port.name}"
        producers[port.name] = node_id
        lines.append(
            f"  {node_id} [shape=oval, label={_quote(port.name)}, style=filled, "
            "fillcolor=lightblue];"
        )
    side_producers: dict[str, str] = {}
    open_groups: list[SubgraphUse] = []
    # Grouped by subgraph use, so that each cluster is written in one piece.
    for node in sorted(nodes, key=lambda n: [use.name for use in n.subgraphs]):
        node_id = f"n{node.index}"
        subtitle = node.calculator if node.title != node.calculator else ""
        if node.handler:
            subtitle = f"{subtitle}\n[{node.handler}]" if subtitle else f"[{node.handler}]"
        label = node.title + (f"\n{subtitle}" if subtitle else "")
        shared = 0
        while (
            shared < min(len(open_groups), len(node.subgraphs))
            and open_groups[shared] == node.subgraphs[shared]
        ):
            shared += 1
        lines += ["  }"] * (len(open_groups) - shared)
        for use in node.subgraphs[shared:]:
            lines.append(f"  subgraph {_quote('cluster_' + use.name)} {{")
            lines.append(f"    label={_quote(subgraph_label(use))}; style=dashed;")
        open_groups = list(node.subgraphs)
        lines.append(f"  {node_id} [shape=box, style=rounded, label={_quote(label)}];")
        for port in node.outputs:
            producers[port.name] = node_id
        for port in node.side_outputs:
            side_producers[port.name] = node_id
    lines += ["  }"] * len(open_groups)
    consumed_side: set[str] = set()
    for node in nodes:
        node_id = f"n{node.index}"
        for port in node.inputs:
            source = producers.get(port.name, f"missing_{port.name}")
            if source.startswith("missing_"):
                lines.append(
                    f"  {source} [shape=plaintext, fontcolor=red, "
                    f"label={_quote(port.name + ' (no producer)')}];"
                )
            label = f"{port.name}" + (f" ({port.label})" if port.label else "")
            if port.name in node.back_edges:
                lines.append(
                    f"  {source} -> {node_id} [label={_quote(label + ' back edge')}, style=dashed, "
                    "color=red, fontcolor=red, constraint=false];"
                )
            else:
                lines.append(f"  {source} -> {node_id} [label={_quote(label)}];")
        for port in node.side_inputs:
            side_source = side_producers.get(port.name)
            if side_source is None:
                side_source = f"side_{port.name}"
                if port.name not in consumed_side:
                    lines.append(f"  {side_source} [shape=note, label={_quote(port.name)}];")
            consumed_side.add(port.name)
            lines.append(
                f"  {side_source} -> {node_id} [style=dashed, arrowhead=empty, "
                f"label={_quote(port.name + (f' ({port.label})' if port.label else ''))}];"
            )
    for port in _ports(list(proto.output_stream)):
        node_id = f"out_{port.name}"
        lines.append(
            f"  {node_id} [shape=oval, label={_quote(port.name)}, style=filled, "
            "fillcolor=lightgreen];"
        )
        producer = producers.get(port.name)
        if producer is not None:
            lines.append(f"  {producer} -> {node_id};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_svg(config: GraphConfig) -> str:
    """SVG rendered by Graphviz; raises GraphError when the `dot` program is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        raise GraphError(
            "SVG output needs Graphviz's `dot` program (Debian/Ubuntu: apt install graphviz); "
            "use --format dot or --format text without it."
        )
    result = subprocess.run(
        [dot, "-Tsvg"], input=to_dot(config), capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise GraphError(f"dot failed: {result.stderr.strip()}")
    return result.stdout


def to_text(config: GraphConfig) -> str:
    nodes = _nodes(config)
    proto = config.proto
    lines: list[str] = []
    if proto.input_stream:
        lines.append("graph inputs:  " + ", ".join(proto.input_stream))
    if proto.output_stream:
        lines.append("graph outputs: " + ", ".join(proto.output_stream))
    if proto.input_side_packet:
        lines.append("side packets:  " + ", ".join(proto.input_side_packet))
    for node in nodes:
        title = node.title if node.title == node.calculator else f"{node.title} ({node.calculator})"
        location = config.location("node", node.index)
        where = ""
        if location is not None:
            where = (
                f"  [{location}]" if location.path != config.path else f"  [line {location.line}]"
            )
        lines.append(f"node {node.index}: {title}{where}")
        if node.subgraphs:
            chain = " > ".join(subgraph_label(use) for use in node.subgraphs)
            lines.append(f"    subgraph: {chain}")
        if node.handler:
            lines.append(f"    handler: {node.handler}")
        for port in node.inputs:
            marker = "  <- back edge" if port.name in node.back_edges else ""
            lines.append(f"    in   {port.label or '-':<22} {port.name}{marker}")
        for port in node.outputs:
            lines.append(f"    out  {port.label or '-':<22} {port.name}")
        for port in node.side_inputs:
            lines.append(f"    side {port.label or '-':<22} {port.name}")
        for port in node.side_outputs:
            lines.append(f"    side-out {port.label or '-':<18} {port.name}")
    return "\n".join(lines) + "\n"


FORMATS = {"dot": to_dot, "svg": to_svg, "text": to_text}


# The model of a config that the pictures share (graphruntime.layout draws from it too).
node_models = _nodes
port_list = _ports
