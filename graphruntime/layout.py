"""A graph picture computed in Python: a layered top-to-bottom layout and its SVG.

`graphrt graph show --format svg` asks Graphviz; this draws the same picture (calculators as boxes,
graph inputs and outputs as ovals, side packets as notes with dashed edges, back edges dashed in
red and kept out of the ranking) with nothing but the standard library, so a server can draw its
graphs on a web page without Graphviz, offline. The method is the classic layered one: ranks by
longest path over forward edges, placeholder points where an edge spans several ranks, a few
barycenter sweeps to reduce crossings, then rows centred on each other.

Every element carries `data-*` attributes (node config index, stream name) so a page can hang
live figures on it; `figure_lines` reserves room for them inside each calculator box.
"""

from __future__ import annotations

import html
import itertools
from collections import defaultdict, deque
from dataclasses import dataclass, field

from graphruntime.config import GraphConfig
from graphruntime.drawing import node_models, port_list, subgraph_label

CHAR_WIDTH = 7.0  # px per character at the 12px font used
LINE_HEIGHT = 15.0
ROW_GAP = 56.0
COLUMN_GAP = 36.0
MARGIN = 24.0


@dataclass
class Box:
    id: str
    kind: str  # "input" | "output" | "node" | "side" | "dummy"
    label: str
    sublabel: str = ""
    config_index: int | None = None  # calculators: position in the graph file
    x: float = 0.0  # centre
    y: float = 0.0  # top
    w: float = 0.0
    h: float = 0.0
    rank: int = 0
    order: float = 0.0
    groups: tuple[tuple[str, str], ...] = ()  # (name, label) of the subgraphs it came from


@dataclass
class Edge:
    source: str
    target: str
    kind: str  # "stream" | "back" | "side"
    label: str
    stream: str
    points: list[tuple[float, float]] = field(default_factory=list)


@dataclass
class Layout:
    boxes: dict[str, Box]
    edges: list[Edge]
    width: float
    height: float


def _text_width(*texts: str) -> float:
    return max(len(text) for text in texts) * CHAR_WIDTH + 24.0


def _graph_elements(config: GraphConfig, figure_lines: int) -> tuple[dict[str, Box], list[Edge]]:
    proto = config.proto
    boxes: dict[str, Box] = {}
    edges: list[Edge] = []
    producers: dict[str, str] = {}
    for port in port_list(list(proto.input_stream)):
        box_id = f"in:{port.name}"
        boxes[box_id] = Box(box_id, "input", port.name, w=_text_width(port.name), h=30.0)
        producers[port.name] = box_id
    models = node_models(config)
    side_producers: dict[str, str] = {}
    for model in models:
        box_id = f"node:{model.index}"
        sublabel = model.calculator if model.title != model.calculator else ""
        if model.handler:
            sublabel = f"{sublabel} [{model.handler}]" if sublabel else f"[{model.handler}]"
        height = LINE_HEIGHT * (2 + figure_lines) + 14.0
        width = max(_text_width(model.title, sublabel), 150.0 if figure_lines else 0.0)
        boxes[box_id] = Box(box_id, "node", model.title, sublabel, model.index, w=width, h=height)
        boxes[box_id].groups = tuple((use.name, subgraph_label(use)) for use in model.subgraphs)
        for port in model.outputs:
            producers[port.name] = box_id
        for port in model.side_outputs:
            side_producers[port.name] = box_id
    for model in models:
        box_id = f"node:{model.index}"
        for port in model.inputs:
            source = producers.get(port.name)
            if source is None:
                source = f"missing:{port.name}"
                label = f"{port.name} (no producer)"
                boxes.setdefault(source, Box(source, "input", label, w=_text_width(label), h=30.0))
            kind = "back" if port.name in model.back_edges else "stream"
            edges.append(Edge(source, box_id, kind, port.name, port.name))
        for port in model.side_inputs:
            source = side_producers.get(port.name)
            if source is None:
                source = f"side:{port.name}"
                boxes.setdefault(
                    source, Box(source, "side", port.name, w=_text_width(port.name), h=28.0)
                )
                edges.append(Edge(source, box_id, "side", "", port.name))  # the note names it
            else:
                edges.append(Edge(source, box_id, "side", port.name, port.name))
    for port in port_list(list(proto.output_stream)):
        box_id = f"out:{port.name}"
        boxes[box_id] = Box(box_id, "output", port.name, w=_text_width(port.name), h=30.0)
        producer = producers.get(port.name)
        if producer is not None:
            edges.append(Edge(producer, box_id, "stream", "", port.name))
    return boxes, edges


def _rank(boxes: dict[str, Box], edges: list[Edge]) -> None:
    """Longest path from the sources over forward edges; an unmarked cycle is cut where met."""
    successors: dict[str, list[str]] = defaultdict(list)
    indegree = dict.fromkeys(boxes, 0)
    for edge in edges:
        if edge.kind != "back" and edge.source != edge.target:
            successors[edge.source].append(edge.target)
            indegree[edge.target] += 1
    ready = deque(box_id for box_id, degree in indegree.items() if degree == 0)
    done: set[str] = set()
    while len(done) < len(boxes):
        if not ready:  # a cycle without a back-edge mark: start from what is left
            ready.append(next(box_id for box_id in boxes if box_id not in done))
        box_id = ready.popleft()
        if box_id in done:
            continue
        done.add(box_id)
        for following in successors[box_id]:
            if following in done:
                continue
            boxes[following].rank = max(boxes[following].rank, boxes[box_id].rank + 1)
            indegree[following] -= 1
            if indegree[following] == 0:
                ready.append(following)
    # Notes sit right above the first node that reads them.
    for box in boxes.values():
        if box.kind == "side":
            targets = [boxes[e.target].rank for e in edges if e.source == box.id]
            if targets:
                box.rank = max(0, min(targets) - 1)


def _split_long_edges(boxes: dict[str, Box], edges: list[Edge]) -> dict[int, list[str]]:
    """Chains of dummy boxes for edges spanning several ranks; returns edge index -> chain."""
    chains: dict[int, list[str]] = {}
    for index, edge in enumerate(edges):
        if edge.kind == "back":
            continue
        low, high = boxes[edge.source].rank, boxes[edge.target].rank
        if high - low <= 1:
            continue
        chain = []
        for rank in range(low + 1, high):
            dummy = f"dummy:{index}:{rank}"
            boxes[dummy] = Box(dummy, "dummy", "", w=14.0, h=1.0, rank=rank)
            chain.append(dummy)
        chains[index] = chain
    return chains


def _order(boxes: dict[str, Box], links: list[tuple[str, str]]) -> list[list[Box]]:
    ranks: dict[int, list[Box]] = defaultdict(list)
    for box in boxes.values():
        ranks[box.rank].append(box)
    rows = [ranks[rank] for rank in sorted(ranks)]
    for row in rows:
        for position, box in enumerate(row):
            box.order = position
    up: dict[str, list[str]] = defaultdict(list)
    down: dict[str, list[str]] = defaultdict(list)
    for source, target in links:
        down[source].append(target)
        up[target].append(source)
    for sweep in range(6):
        sequence = rows[1:] if sweep % 2 == 0 else list(reversed(rows[:-1]))
        neighbours = up if sweep % 2 == 0 else down
        for row in sequence:
            for box in row:
                linked = [boxes[other].order for other in neighbours[box.id]]
                box.order = sum(linked) / len(linked) if linked else box.order
            row.sort(key=lambda b: b.order)
            for position, box in enumerate(row):
                box.order = position
    return rows


def layout(config: GraphConfig, figure_lines: int = 0) -> Layout:
    """Positions of every box and edge; see the module docstring."""
    boxes, edges = _graph_elements(config, figure_lines)
    _rank(boxes, edges)
    chains = _split_long_edges(boxes, edges)
    links: list[tuple[str, str]] = []
    for index, edge in enumerate(edges):
        if edge.kind == "back" or edge.source == edge.target:
            continue
        path = [edge.source, *chains.get(index, []), edge.target]
        links.extend(itertools.pairwise(path))
    rows = _order(boxes, links)
    widths = [sum(box.w for box in row) + COLUMN_GAP * (len(row) - 1) for row in rows]
    widest = max(widths, default=0.0)
    y = MARGIN
    for row, width in zip(rows, widths, strict=True):
        x = MARGIN + (widest - width) / 2
        height = max(box.h for box in row)
        for box in row:
            box.x = x + box.w / 2
            box.y = y + (height - box.h) / 2
            x += box.w + COLUMN_GAP
        y += height + ROW_GAP
    for index, edge in enumerate(edges):
        source, target = boxes[edge.source], boxes[edge.target]
        if edge.kind == "back" or edge.source == edge.target:
            edge.points = [
                (source.x + source.w / 2, source.y + source.h * 0.7),
                (target.x + target.w / 2, target.y + target.h * 0.3),
            ]
            continue
        points = [(source.x, source.y + source.h)]
        for dummy in chains.get(index, []):
            box = boxes[dummy]
            points.append((box.x, box.y))
        points.append((target.x, target.y))
        edge.points = points
    visible = {key: box for key, box in boxes.items() if box.kind != "dummy"}
    right = max((box.x + box.w / 2 for box in visible.values()), default=0.0)
    for edge in edges:  # back-edge loops and their labels stick out on the right
        if edge.kind == "back" or edge.source == edge.target:
            label_x, _, _ = _label_point(edge)
            label = edge.label + " (back edge) · 000/s"
            right = max(right, label_x + len(label) * CHAR_WIDTH * 0.95)
    width = max(widest + 2 * MARGIN, right + MARGIN)
    return Layout(visible, edges, width, y - ROW_GAP + MARGIN)


def _bulge(edge: Edge) -> float:
    """How far right a back edge's curve reaches for its control points."""
    (x1, y1), (x2, y2) = edge.points[0], edge.points[-1]
    return max(x1, x2) + 50.0 + abs(y1 - y2) * 0.15


def _path(edge: Edge) -> str:
    (x1, y1), (x2, y2) = edge.points[0], edge.points[-1]
    if edge.kind == "back" or edge.source == edge.target:
        bulge = _bulge(edge)
        return f"M{x1:.1f},{y1:.1f} C{bulge:.1f},{y1:.1f} {bulge:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    parts = [f"M{x1:.1f},{y1:.1f}"]
    for (ax, ay), (bx, by) in itertools.pairwise(edge.points):
        middle = (ay + by) / 2
        parts.append(f"C{ax:.1f},{middle:.1f} {bx:.1f},{middle:.1f} {bx:.1f},{by:.1f}")
    return " ".join(parts)


def _label_point(edge: Edge) -> tuple[float, float, str]:
    if edge.kind == "back" or edge.source == edge.target:
        (x1, y1), (x2, y2) = edge.points[0], edge.points[-1]
        start = max(x1, x2)
        return start + 0.75 * (_bulge(edge) - start) + 6.0, (y1 + y2) / 2 + 4.0, "start"
    points = edge.points
    (ax, ay), (bx, by) = points[len(points) // 2 - 1], points[len(points) // 2]
    return (ax + bx) / 2 + 6.0, (ay + by) / 2 + 4.0, "start"


STYLE = """
.graphrt-graph text { font: 12px Helvetica, Arial, sans-serif; fill: #1f2328; }
.graphrt-graph .node rect { fill: #fff; stroke: #57606a; stroke-width: 1.2; }
.graphrt-graph .node .sub { fill: #57606a; font-size: 11px; }
.graphrt-graph .input ellipse { fill: #d8ecff; stroke: #57606a; }
.graphrt-graph .output ellipse { fill: #d9f5dd; stroke: #57606a; }
.graphrt-graph .side path { fill: #fff8c5; stroke: #9a6700; }
.graphrt-graph .edge path { fill: none; stroke: #57606a; stroke-width: 1.2; }
.graphrt-graph .edge.back path { stroke: #cf222e; stroke-dasharray: 5 3; }
.graphrt-graph .edge.side path { stroke-dasharray: 3 3; }
.graphrt-graph .edge text { font-size: 11px; fill: #57606a; }
.graphrt-graph .edge.back text { fill: #cf222e; }
.graphrt-graph .group rect { fill: #f6f8fa; stroke: #8c959f; stroke-dasharray: 6 4; }
.graphrt-graph .group text { font-size: 11px; fill: #57606a; }
"""
GROUP_PAD = 18.0  # around a subgraph's nodes, more for each subgraph nested inside it
GROUP_NESTING = 14.0


@dataclass
class _Group:
    name: str
    label: str
    left: float
    top: float
    right: float
    bottom: float


def _groups(graph_layout: Layout) -> list[_Group]:
    """A rectangle around each subgraph's nodes, outermost first (so drawn first, behind)."""
    members: dict[str, list[tuple[Box, int]]] = {}
    labels: dict[str, tuple[str, int]] = {}
    for box in graph_layout.boxes.values():
        for depth, (name, label) in enumerate(box.groups):
            members.setdefault(name, []).append((box, len(box.groups) - depth - 1))
            labels[name] = (label, depth)
    groups = []
    for name, boxes in sorted(members.items(), key=lambda item: labels[item[0]][1]):
        pad = GROUP_PAD + GROUP_NESTING * max(nested for _, nested in boxes)
        groups.append(
            _Group(
                name,
                labels[name][0],
                min(b.x - b.w / 2 for b, _ in boxes) - pad,
                min(b.y for b, _ in boxes) - pad,
                max(b.x + b.w / 2 for b, _ in boxes) + pad,
                max(b.y + b.h for b, _ in boxes) + pad / 2,
            )
        )
    return groups


def to_svg(graph_layout: Layout, figure_lines: int = 0) -> str:
    """The layout as a standalone SVG document (its style inline, no external references)."""
    escape = html.escape
    groups = _groups(graph_layout)
    shift_x = max([0.0, *(4.0 - g.left for g in groups)])
    shift_y = max([0.0, *(4.0 - g.top for g in groups)])
    width = max([graph_layout.width + shift_x, *(g.right + shift_x + 4.0 for g in groups)])
    height = graph_layout.height + shift_y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graphrt-graph" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">',
        "<defs>"
        '<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#57606a"/></marker>'
        '<marker id="arrow-back" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#cf222e"/></marker></defs>',
        f"<style>{STYLE}</style>",
        f'<g transform="translate({shift_x:.1f},{shift_y:.1f})">',
    ]
    for group in groups:
        group_w, group_h = group.right - group.left, group.bottom - group.top
        out.append(
            f'<g class="group" data-subgraph="{escape(group.name, quote=True)}">'
            f'<rect x="{group.left:.1f}" y="{group.top:.1f}" '
            f'width="{group_w:.1f}" height="{group_h:.1f}" rx="8"/>'
            f'<text x="{group.left + 8:.1f}" y="{group.top + 13:.1f}">{escape(group.label)}</text>'
            "</g>"
        )
    for edge in graph_layout.edges:
        marker = "arrow-back" if edge.kind == "back" else "arrow"
        x, y, anchor = _label_point(edge)
        stream = escape(edge.stream, quote=True)
        label = escape(edge.label + (" (back edge)" if edge.kind == "back" else ""))
        out.append(
            f'<g class="edge {edge.kind}" data-stream="{stream}">'
            f'<path d="{_path(edge)}" marker-end="url(#{marker})"/>'
            f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{label}'
            f'<tspan class="rate" data-stream="{stream}"></tspan></text></g>'
        )
    for box in graph_layout.boxes.values():
        left, top = box.x - box.w / 2, box.y
        label = escape(box.label)
        if box.kind == "node":
            out.append(
                f'<g class="node" data-node="{box.config_index}" tabindex="0">'
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" '
                f'rx="6"/><text x="{box.x:.1f}" y="{top + 18:.1f}" text-anchor="middle" '
                f'font-weight="bold">{label}</text>'
                f'<text class="sub" x="{box.x:.1f}" y="{top + 18 + LINE_HEIGHT:.1f}" '
                f'text-anchor="middle">{escape(box.sublabel)}</text>'
            )
            for line in range(figure_lines):
                line_y = top + 18 + LINE_HEIGHT * (2 + line)
                out.append(
                    f'<text class="fig" data-line="{line}" x="{box.x:.1f}" y="{line_y:.1f}" '
                    'text-anchor="middle"></text>'
                )
            out.append("</g>")
        elif box.kind in ("input", "output"):
            out.append(
                f'<g class="{box.kind}"><ellipse cx="{box.x:.1f}" cy="{top + box.h / 2:.1f}" '
                f'rx="{box.w / 2:.1f}" ry="{box.h / 2:.1f}"/><text x="{box.x:.1f}" '
                f'y="{top + box.h / 2 + 4:.1f}" text-anchor="middle">{label}</text></g>'
            )
        else:
            right, bottom = left + box.w, top + box.h
            out.append(
                f'<g class="side"><path d="M{left:.1f},{top:.1f} H{right - 8:.1f} '
                f'L{right:.1f},{top + 8:.1f} V{bottom:.1f} H{left:.1f} Z"/>'
                f'<text x="{box.x:.1f}" y="{top + box.h / 2 + 4:.1f}" '
                f'text-anchor="middle">{label}</text></g>'
            )
    out.append("</g></svg>")
    return "\n".join(out) + "\n"


def to_html(config: GraphConfig) -> str:
    """`graphrt graph show --format html`: the /graphs page's picture, without live figures."""
    title = html.escape(config.path or "graph")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body>\n{to_svg(layout(config))}</body></html>\n"
    )
