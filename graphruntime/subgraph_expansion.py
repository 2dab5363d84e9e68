"""Replace every node that names a subgraph by the subgraph's nodes, as MediaPipe expands them.

The rules are MediaPipe's (framework/tool/subgraph_expansion.cc and options_util.cc), so a graph
expands here to the nodes MediaPipe would run:

- Before a graph's nodes are expanded, each node's `option_value: "node/path:graph/path"` copies
  fields of the graph's options (its `options` or `graph_options`, merged with the using node's
  options of that type) into the node's options, which then move to `node_options`.
- Subgraph nodes are expanded in rounds: the nodes that are not subgraphs keep their order, the
  subgraphs' nodes follow in the order of the nodes that used them, and a round repeats until no
  node names a subgraph.
- Every name inside a subgraph (node names, which it gets even when unnamed, streams, side
  packets) is prefixed with the using node's name, lowercased with ".", " " and ":" made "_",
  then "__". The subgraph's declared streams and side packets are then renamed to what the using
  node connects to them, tag and index alike; a declared input the using node leaves unconnected
  is dropped from the inner nodes.
- A using node may not set source_layer, buffer_size_hint, output_stream_handler or
  input_stream_info; its executor and input_stream_handler are dropped, as MediaPipe drops them.

Each expanded node keeps where it was written (in the subgraph's file) and the chain of subgraph
uses it came from, so errors, the graph page and the profiler can say both.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from google.protobuf import message_factory, text_format

from graphruntime._proto import calculator_pb2
from graphruntime.config import GraphConfig, NodeParts, SubgraphUse, canonical_node_names
from graphruntime.config_text import OpaqueOptions, OpaqueRecord, OptionsEntry
from graphruntime.errors import GraphConfigError, SourceLocation
from graphruntime.options_text import (
    TextMessage,
    entry_message,
    entry_message_type,
    get_values,
    merge,
    merge_values,
    message_descriptor,
    parse_field_path,
)
from graphruntime.subgraphs import SubgraphContext, SubgraphDefinition, SubgraphLibrary
from graphruntime.tags import TagError, TagMap, parse_tag_index_name

logger = logging.getLogger(__name__)

Node = calculator_pb2.CalculatorGraphConfig.Node
MAX_DEPTH = 64
TYPE_URL_PREFIX = "type.googleapis.com/"
_PORT_FIELDS = ("input_stream", "output_stream", "input_side_packet", "output_side_packet")
_STREAM_KINDS = (
    ("input_stream", "input streams"),
    ("output_stream", "output streams"),
    ("input_side_packet", "input side packets"),
    ("output_side_packet", "output side packets"),
)


class SubgraphError(GraphConfigError):
    """A subgraph cannot be expanded; the message names the subgraph's file."""


@dataclass
class _Node:
    proto: Node
    parts: NodeParts


def expand_subgraphs(config: GraphConfig, library: SubgraphLibrary) -> GraphConfig:
    """`config` with its subgraphs expanded; `config` itself when it has nothing to expand."""
    library = library.for_graph(config.path)
    if not any(n.option_value or library.find(n.calculator) for n in config.proto.node):
        return config
    nodes = [_Node(_copy(node), config.node_parts(i)) for i, node in enumerate(config.proto.node)]
    _apply_option_values(nodes, config.option_entries(), [])
    generators = list(config.proto.packet_generator)
    handlers = list(config.proto.status_handler)
    while True:
        plain = [n for n in nodes if library.find(n.proto.calculator) is None]
        uses = [n for n in nodes if library.find(n.proto.calculator) is not None]
        if not uses:
            break
        nodes = list(plain)
        names = canonical_node_names([n.proto for n in plain + uses])
        for offset, use in enumerate(uses):
            definition = library.find(use.proto.calculator)
            assert definition is not None
            subgraph = _build(use, definition, config.path)
            inner = _expand_one(use, names[len(plain) + offset], definition, subgraph)
            nodes += inner.nodes
            generators += inner.generators
            handlers += inner.handlers
    proto = calculator_pb2.CalculatorGraphConfig()
    proto.CopyFrom(config.proto)
    proto.ClearField("node")
    proto.node.extend(n.proto for n in nodes)
    proto.ClearField("packet_generator")
    proto.packet_generator.extend(generators)
    proto.ClearField("status_handler")
    proto.status_handler.extend(handlers)
    return config.with_nodes(proto, [n.parts for n in nodes])


def _copy(node: Node) -> Node:
    copy = Node()
    copy.CopyFrom(node)
    return copy


def _single_node_config(node: _Node, path: str | None) -> GraphConfig:
    proto = calculator_pb2.CalculatorGraphConfig()
    proto.node.append(node.proto)
    return GraphConfig(path=path, proto=proto).with_nodes(proto, [node.parts])


def _where(node: _Node) -> SourceLocation | None:
    return node.parts.locations.get(())


def _build(use: _Node, definition: SubgraphDefinition, path: str | None) -> GraphConfig:
    chain = [s.type for s in use.parts.subgraphs]
    where = _where(use)
    if definition.type in chain or len(chain) >= MAX_DEPTH:
        cycle = " -> ".join([*chain, definition.type])
        raise SubgraphError(
            f'Subgraph "{definition.type}" ({definition.origin}) uses itself: {cycle}.', where
        )
    bad = [name for name in ("source_layer", "buffer_size_hint") if getattr(use.proto, name)]
    bad += ["output_stream_handler"] if use.proto.HasField("output_stream_handler") else []
    bad += ["input_stream_info"] if use.proto.input_stream_info else []
    if bad:
        raise SubgraphError(
            f'Node "{use.proto.name or use.proto.calculator}" uses subgraph "{definition.type}" '
            f"({definition.origin}) but sets {', '.join(bad)}, which only a calculator has; set "
            "it on the subgraph's nodes.",
            where,
        )
    for dropped, given in (
        ("executor", bool(use.proto.executor)),
        ("input_stream_handler", use.proto.HasField("input_stream_handler")),
    ):
        if given:
            logger.warning(
                "%s: %s of a node that uses subgraph %s is ignored, as in MediaPipe; set it on "
                "the subgraph's nodes",
                where or path,
                dropped,
                definition.type,
            )
    context = SubgraphContext(use.proto, _single_node_config(use, path), 0)
    used = f" (subgraph {definition.type} used at {where})" if where else ""
    try:
        return definition.build(context)
    except GraphConfigError as error:
        raise SubgraphError(error.message + used, error.location) from None
    except Exception as error:  # whatever the user's subgraph function raised
        raise SubgraphError(
            f'Subgraph "{definition.type}" ({definition.origin}) could not be built: '
            f"{type(error).__name__}: {error}",
            where,
        ) from error


@dataclass
class _Expansion:
    nodes: list[_Node]
    generators: list[Any]
    handlers: list[Any]


def _prefix(name: str) -> str:
    lowered = name.lower()
    for old in ".: ":
        lowered = lowered.replace(old, "_")
    return lowered + "__"


def _rename(specs: Any, rename: Any) -> None:
    for i, spec in enumerate(specs):
        head, colon, name = spec.rpartition(":")
        specs[i] = f"{head}{colon}{rename(name)}"


def _expand_one(
    use: _Node, use_name: str, definition: SubgraphDefinition, subgraph: GraphConfig
) -> _Expansion:
    where = _where(use)
    via = f"subgraph {definition.type}" + (f" used at {where}" if where else "")
    if where is not None and where.via:
        via += f", {where.via}"
    chain = (*use.parts.subgraphs, SubgraphUse(use_name, definition.type, where))
    inner = []
    for i, node_proto in enumerate(subgraph.proto.node):
        parts = subgraph.node_parts(i)
        parts.locations = {p: replace(loc, via=via) for p, loc in parts.locations.items()}
        parts.opaque = [replace(r, entry=_via(r.entry, via)) for r in parts.opaque]
        parts.subgraphs = chain
        inner.append(_Node(_copy(node_proto), parts))
    _apply_option_values(inner, subgraph.option_entries(), _node_entries(use))

    prefix = _prefix(use_name)

    def add_prefix(name: str) -> str:
        return prefix + name

    declared = {}
    for field, _ in _STREAM_KINDS:
        specs = list(getattr(subgraph.proto, field))
        _rename(specs, add_prefix)
        declared[field] = specs
    for item, name in zip(inner, canonical_node_names([n.proto for n in inner]), strict=True):
        item.proto.name = prefix + name
        for field in _PORT_FIELDS:
            _rename(getattr(item.proto, field), add_prefix)
    copied = calculator_pb2.CalculatorGraphConfig()
    copied.packet_generator.extend(subgraph.proto.packet_generator)
    copied.status_handler.extend(subgraph.proto.status_handler)
    generators, handlers = list(copied.packet_generator), list(copied.status_handler)
    for generator in generators:
        _rename(generator.input_side_packet, add_prefix)
        _rename(generator.output_side_packet, add_prefix)
    for handler in handlers:
        _rename(handler.input_side_packet, add_prefix)

    streams: dict[str, str] = {}
    side_packets: dict[str, str] = {}
    for field, label in _STREAM_KINDS:
        target = streams if "stream" in field else side_packets
        target.update(
            _corresponding(declared[field], getattr(use.proto, field), label, definition, where)
        )
    ignored_streams = _ignored(declared["input_stream"], use.proto.input_stream)
    ignored_side = _ignored(declared["input_side_packet"], use.proto.input_side_packet)
    for item in inner:
        for field in _PORT_FIELDS:
            mapping = streams if "stream" in field else side_packets
            _rename(getattr(item.proto, field), lambda n, m=mapping: m.get(n, n))
        _drop(item.proto.input_stream, ignored_streams)
        _drop(item.proto.input_side_packet, ignored_side)
    for generator in generators:
        _rename(generator.input_side_packet, lambda n: side_packets.get(n, n))
        _rename(generator.output_side_packet, lambda n: side_packets.get(n, n))
        _drop(generator.input_side_packet, ignored_side)
    return _Expansion(inner, generators, handlers)


def _via(entry: OptionsEntry, via: str) -> OptionsEntry:
    """The options block with its locations saying which subgraph use brought it in."""
    opaque = entry.opaque
    if opaque is not None:
        opaque = replace(opaque, location=replace(opaque.location, via=via))
    location = replace(entry.location, via=via) if entry.location else None
    return replace(entry, location=location, opaque=opaque)


def _tag_map(specs: Any, what: str, where: SourceLocation | None) -> TagMap:
    try:
        return TagMap.from_specs(specs)
    except TagError as error:
        raise SubgraphError(f"{what}: {error}", where) from None


def _corresponding(
    declared: list[str],
    connected: Any,
    label: str,
    definition: SubgraphDefinition,
    where: SourceLocation | None,
) -> dict[str, str]:
    """The subgraph's (prefixed) names of `label`, mapped to what the using node connects."""
    inside = _tag_map(declared, f"the {label} subgraph {definition.type} declares", where)
    outside = _tag_map(connected, f"the {label} of the node that uses {definition.type}", where)
    mapping: dict[str, str] = {}
    for tag in outside.tags():
        shown = tag or "(untagged)"
        if not inside.has_tag(tag):
            offered = ", ".join(t or "(untagged)" for t in inside.tags()) or "none"
            raise SubgraphError(
                f'Tag "{shown}" of the {label} is not declared by subgraph "{definition.type}" '
                f"({definition.origin}); it declares: {offered}.",
                where,
            )
        if outside.count(tag) > inside.count(tag):
            raise SubgraphError(
                f'Tag "{shown}" has {outside.count(tag)} indexes in the node but subgraph '
                f'"{definition.type}" ({definition.origin}) declares only {inside.count(tag)} '
                f"in its {label}.",
                where,
            )
        for index in range(outside.count(tag)):
            mapping[inside.names[inside.id(tag, index)]] = outside.names[outside.id(tag, index)]
    return mapping


def _ignored(declared: list[str], connected: Any) -> set[str]:
    inside, outside = TagMap.from_specs(declared), TagMap.from_specs(connected)
    return {name for tag, index, name in inside.items() if outside.find(tag, index) is None}


def _drop(specs: Any, names: set[str]) -> None:
    for i in range(len(specs) - 1, -1, -1):
        if parse_tag_index_name(specs[i]).name in names:
            del specs[i]


# ------------------------------------------------------------------------------ option_value


def _node_entries(node: _Node) -> list[OptionsEntry]:
    return _single_node_config(node, None).option_entries("node", 0)


def _pick(entries: list[OptionsEntry], extension_type: str | None) -> OptionsEntry | None:
    for entry in entries:
        if extension_type is None or entry_message_type(entry) == extension_type:
            return entry
    return None


def _split_option_value(text: str) -> tuple[str, str] | None:
    """MediaPipe splits "node:graph" at the first colon that is not part of "::"."""
    pos = 0
    while (found := text.find(":", pos)) >= 0:
        if text[found + 1 : found + 2] != ":":
            return text[:found], text[found + 1 :]
        pos = found + 2
    return None


def _apply_option_values(
    nodes: list[_Node], graph_entries: list[OptionsEntry], parent_entries: list[OptionsEntry]
) -> None:
    for node in nodes:
        for definition in node.proto.option_value:
            _apply_option_value(node, definition, graph_entries, parent_entries)
        node.proto.ClearField("option_value")


def _apply_option_value(
    node: _Node,
    definition: str,
    graph_entries: list[OptionsEntry],
    parent_entries: list[OptionsEntry],
) -> None:
    where = node.parts.locations.get(("option_value",)) or _where(node)
    split = _split_option_value(definition)
    if split is None:
        raise SubgraphError(
            f'option_value "{definition}" is not "node_field:graph_field" '
            '(example: "min_score:options/threshold").',
            where,
        )
    try:
        node_type, node_path = parse_field_path(split[0])
        graph_type, graph_path = parse_field_path(split[1])
    except ValueError as error:
        raise SubgraphError(f'option_value "{definition}": {error}', where) from None
    graph_entry = _pick(graph_entries, graph_type)
    parent_entry = _pick(parent_entries, graph_type)
    graph_options: TextMessage | None = None
    graph_message_type = ""
    for entry in (graph_entry, parent_entry):
        if entry is None:
            continue
        message_type = entry_message_type(entry)
        if graph_options is None:
            graph_options, graph_message_type = entry_message(entry), message_type
        elif message_type != graph_message_type:
            raise SubgraphError(
                f'option_value "{definition}": the subgraph\'s options are '
                f"{graph_message_type} but the node that uses it gives {message_type}; name the "
                'type with "Ext::Type/field".',
                where,
            )
        else:
            graph_options = merge(
                graph_options, entry_message(entry), message_descriptor(message_type)
            )
    entries = _node_entries(node)
    node_entry = _pick(entries, node_type)
    if node_entry is None:
        wanted = f"options of type {node_type}" if node_type else "options"
        raise SubgraphError(
            f'option_value "{definition}" of node "{node.proto.name or node.proto.calculator}" '
            f"needs the node to have {wanted} (options or node_options) to copy into.",
            where,
        )
    if graph_options is None:
        return
    node_message_type = entry_message_type(node_entry)
    try:
        values = get_values(graph_options, graph_path)
        updated = merge_values(
            entry_message(node_entry), node_path, values, message_descriptor(node_message_type)
        )
    except (IndexError, ValueError) as error:
        raise SubgraphError(f'option_value "{definition}": {error}', where) from None
    _set_node_options(node, node_entry, node_message_type, updated, entries)


def _set_node_options(
    node: _Node,
    changed: OptionsEntry,
    message_type: str,
    text: TextMessage,
    entries: list[OptionsEntry],
) -> None:
    """MediaPipe's SetOptionsMessage: the options go to node_options (replacing that type's
    entry, or appended), and `options` is cleared."""
    location = changed.opaque.location if changed.opaque else changed.location
    desc = message_descriptor(message_type)
    if desc is not None:
        message = text_format.Parse(text.to_text(), message_factory.GetMessageClass(desc)())
        new = OptionsEntry(message_type, "any", location, message.SerializeToString())
    else:
        start = location or SourceLocation(None, 1)
        opaque = OpaqueOptions(message_type, "any", text.to_text(), start)
        new = OptionsEntry(message_type, "any", location, opaque=opaque)
    kept = [e for e in entries if e.kind == "any"]
    positions = [i for i, e in enumerate(kept) if e.type_name == message_type]
    if positions:
        kept[positions[-1]] = new
    else:
        kept.append(new)
    proto = node.proto
    proto.ClearField("options")
    proto.ClearField("node_options")
    records = []
    for index, entry in enumerate(kept):
        url = TYPE_URL_PREFIX + entry.type_name
        item = proto.node_options.add(type_url=url, value=entry.payload)
        if entry.opaque is not None:
            item.value = b""
            records.append(OpaqueRecord(("node_options",), ("node_options", index), url, entry))
    node.parts.opaque = records
