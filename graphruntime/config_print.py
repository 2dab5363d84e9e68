"""Graph configs back to text, with the option blocks of unknown types written as they were.

protobuf's printer cannot show an options block whose type is not in the descriptor pool (the
parser kept it as text, see config_text.py), so each such block is printed through a marker and
then spliced in. `mediapipe_order` sorts nodes as MediaPipe's ValidatedGraphConfig does, so that
`graphrt graph expand` prints what MediaPipe prints.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence

from google.protobuf import text_format
from google.protobuf.message import Message

from graphruntime._proto import calculator_pb2
from graphruntime.config import GraphConfig
from graphruntime.config_text import FieldPath, OpaqueOptions
from graphruntime.options_text import TextField, TextMessage, parse_text_message
from graphruntime.tags import (
    PortSpec,
    TagError,
    names_of,
    parse_tag_index,
    parse_tag_index_name,
)

_MARKER = "graphrt.opaque/"
_MARKED_ANY = re.compile(
    r'^(?P<indent> *)(?P<field>\w+) \{\n *type_url: "' + re.escape(_MARKER) + r'(?P<n>\d+)"\n *\}$',
    re.MULTILINE,
)


def _block(indent: str, url: str, options: OpaqueOptions) -> str:
    message = parse_text_message(options.text, options.location)
    return TextMessage([TextField(f"[{url}]", message)]).to_text(len(indent) // 2)


def _print(marked: Message, config: GraphConfig, owner: FieldPath, indent: int) -> str:
    """`marked`, a copy of the part of `config` at `owner`, as text with the opaque option
    blocks included (it gets markers)."""
    blocks: list[tuple[str, OpaqueOptions]] = []
    extensions: dict[str, list[tuple[str, OpaqueOptions]]] = {}
    for record in config.opaque_records(owner):
        opaque = record.entry.opaque
        assert opaque is not None
        relative = record.owner[len(owner) :]
        if record.slot is not None:
            field, index = record.slot[len(owner)], record.slot[len(owner) + 1]
            assert isinstance(field, str) and isinstance(index, int)
            getattr(marked, field)[index].type_url = f"{_MARKER}{len(blocks)}"
            blocks.append((record.url, opaque))
        elif len(relative) == 1 and isinstance(relative[0], str):
            getattr(marked, relative[0]).SetInParent()
            extensions.setdefault(relative[0], []).append((record.url, opaque))
    text = text_format.MessageToString(marked, indent=indent)

    def splice(match: re.Match[str]) -> str:
        indent_text, field = match["indent"], match["field"]
        url, opaque = blocks[int(match["n"])]
        return f"{indent_text}{field} {{\n{_block(indent_text + '  ', url, opaque)}{indent_text}}}"

    text = _MARKED_ANY.sub(splice, text)
    pad = " " * indent
    for field, entries in extensions.items():
        opener = f"{pad}{field} {{\n"
        start = text.index(opener)
        end = text.index(f"\n{pad}}}", start + len(opener) - 1) + 1
        added = "".join(_block(pad + "  ", url, opaque) for url, opaque in entries)
        text = text[:end] + added + text[end:]
    return text


def config_to_text(config: GraphConfig, order: list[int] | None = None) -> str:
    """The whole config in protobuf text format, nodes first (in `order` when given)."""
    proto = config.proto
    indices = order if order is not None else list(range(len(proto.node)))
    parts = ["node {\n" + _print(proto.node[i], config, ("node", i), 2) + "}\n" for i in indices]
    rest = calculator_pb2.CalculatorGraphConfig()
    rest.CopyFrom(proto)
    rest.ClearField("node")
    parts.append(_print(rest, config, (), 0))
    return "".join(parts)


def _tag_index(spec: str) -> tuple[str, int]:
    try:
        return parse_tag_index(spec)
    except TagError:
        return ("?", -1)


def _ports(specs: Sequence[str]) -> list[PortSpec]:
    """Each spec with its index filled in (untagged ones count up), malformed ones left out."""
    counts: dict[str, int] = {}
    ports = []
    for spec in specs:
        try:
            port = parse_tag_index_name(spec)
        except TagError:
            continue
        index = counts.get(port.tag, 0) if port.index < 0 else port.index
        counts[port.tag] = counts.get(port.tag, 0) + 1
        ports.append(PortSpec(port.tag, index, port.name))
    return ports


def mediapipe_order(proto: calculator_pb2.CalculatorGraphConfig) -> list[int]:
    """Node indices in the order ValidatedGraphConfig sorts them: by stream and side-packet
    edges (back edges and graph inputs excluded), the lowest index first among the ready ones."""
    producers: dict[str, int] = {}
    side_producers: dict[str, int] = {}
    for i, node in enumerate(proto.node):
        for name in names_of(node.output_stream):
            producers.setdefault(name, i)
        for name in names_of(node.output_side_packet):
            side_producers.setdefault(name, i)
    successors: list[set[int]] = [set() for _ in proto.node]
    indegree = [0] * len(proto.node)
    for i, node in enumerate(proto.node):
        back = {_tag_index(info.tag_index) for info in node.input_stream_info if info.back_edge}
        sources = [
            producers.get(port.name)
            for port in _ports(node.input_stream)
            if (port.tag, port.index) not in back
        ] + [side_producers.get(name) for name in names_of(node.input_side_packet)]
        for source in sources:
            if source is not None and i not in successors[source]:
                successors[source].add(i)
                indegree[i] += 1
    ready = [i for i, degree in enumerate(indegree) if degree == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for successor in successors[index]:
            indegree[successor] -= 1
            if indegree[successor] == 0:
                heapq.heappush(ready, successor)
    placed = set(order)
    return order + [i for i in range(len(proto.node)) if i not in placed]  # a cycle: as written
