"""Reading graph.pbtxt files into CalculatorGraphConfig messages, with where each part came from.

`text_format.Parse` alone is not enough for a graph runtime: it reports no positions, so the
validator could not say `FILE:LINE: message` about a node or a stream, and it rejects any
`[type.googleapis.com/mediapipe.FooOptions]` or `[mediapipe.FooOptions.ext]` block whose type is not
in the descriptor pool, although a graph must load before (or without) the calculators that define
those types. So a structural pass (graphruntime.config_text) walks the text first: it records
where every field occurrence is, and cuts the option blocks of unknown types out of a copy of the
text to keep them as opaque text. protobuf's own parser then reads the blanked copy, so it still
converts every scalar, enum and escape itself. This module joins the two into a `GraphConfig`
and decodes node options on demand.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf import descriptor_pool, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

# stream_handler_options_pb2 is imported for its extensions of MediaPipeOptions.
from graphruntime._proto import calculator_pb2, stream_handler_options_pb2  # noqa: F401
from graphruntime.config_text import (
    ANY_TYPE,
    FieldPath,
    OpaqueOptions,
    OpaqueRecord,
    OptionsEntry,
    OptionsKind,
    StructureParser,
)
from graphruntime.errors import GraphConfigError, SourceLocation

M = TypeVar("M", bound=Message)

_PROTOBUF_POSITION = re.compile(r"^\d+(?::\d+)? : ")


def _config_error(
    error: text_format.ParseError, text: str, origin: SourceLocation
) -> GraphConfigError:
    """Converts a protobuf error in `text`, which starts at `origin`, to one about the file."""
    line, column = error.GetLine() or 1, error.GetColumn() or 1
    message = _PROTOBUF_POSITION.sub("", str(error), count=1)
    lines = text.split("\n")
    if line <= len(lines):  # protobuf quotes the whole (here maybe blanked) line; drop it
        message = message.removeprefix(f"'{lines[line - 1]}': ")
    if line == 1:
        column += origin.column - 1
    return GraphConfigError(message, SourceLocation(origin.path, origin.line + line - 1, column))


def _navigate(root: Message, path: FieldPath) -> Any:
    """The message or repeated field at `path`, or None when the path leads nowhere."""
    node: Any = root
    for part in path:
        try:
            if isinstance(part, int):
                node = node[part]
            elif part.startswith("["):
                if "/" in part:  # inside an Any the fields are packed bytes
                    return None
                node = node.Extensions[descriptor_pool.Default().FindExtensionByName(part[1:-1])]
            elif isinstance(node, Message) and part in node.DESCRIPTOR.fields_by_name:
                node = getattr(node, part)
            else:
                return None
        except (IndexError, KeyError, TypeError, AttributeError):
            return None
    return node


def _descriptor(message: Message) -> Descriptor:
    # Looked up in the pool so that it has one static type whichever protobuf backend runs.
    return descriptor_pool.Default().FindMessageTypeByName(message.DESCRIPTOR.full_name)


def _is_any_list(field: FieldDescriptor | None) -> bool:
    message_type = field.message_type if field is not None and field.is_repeated else None
    return message_type is not None and message_type.full_name == ANY_TYPE


def _option_sources(root: Message, owner: FieldPath) -> list[tuple[FieldPath, OptionsKind]]:
    """Where options of `owner` live: extension holders first, since `options` wins in MediaPipe."""
    target = _navigate(root, owner)
    if isinstance(target, Message):
        desc = _descriptor(target)
        if desc.is_extendable:
            return [(owner, "extension")]
        holders: list[tuple[FieldPath, OptionsKind]] = [
            ((*owner, f.name), "extension")
            for f in desc.fields
            if not f.is_repeated and f.message_type is not None and f.message_type.is_extendable
        ]
        return holders + [((*owner, f.name), "any") for f in desc.fields if _is_any_list(f)]
    if not owner or not isinstance(owner[-1], str):
        return []
    parent = _navigate(root, owner[:-1])
    field = (
        _descriptor(parent).fields_by_name.get(owner[-1]) if isinstance(parent, Message) else None
    )
    return [(owner, "any")] if _is_any_list(field) else []


@dataclass(frozen=True)
class SubgraphUse:
    """One subgraph a node of an expanded graph came from: the prefix its names got (the using
    node's name, as MediaPipe forms it), the subgraph's type and where the using node is written."""

    name: str
    type: str
    location: SourceLocation | None


@dataclass
class NodeParts:
    """What a graph knows of one node besides its proto, with paths relative to the node
    (`("input_stream", 0)`), so that an expansion can move the node to another graph."""

    locations: dict[FieldPath, SourceLocation]
    opaque: list[OpaqueRecord]
    subgraphs: tuple[SubgraphUse, ...] = ()


def _relative(record: OpaqueRecord, prefix: FieldPath) -> OpaqueRecord:
    slot = record.slot[len(prefix) :] if record.slot is not None else None
    return replace(record, owner=record.owner[len(prefix) :], slot=slot)


def _absolute(record: OpaqueRecord, prefix: FieldPath) -> OpaqueRecord:
    slot = (*prefix, *record.slot) if record.slot is not None else None
    return replace(record, owner=(*prefix, *record.owner), slot=slot)


class GraphConfig:
    """A parsed CalculatorGraphConfig plus where each part came from.

    Field paths name a field, then an index when the field is repeated: `("node", 2,
    "input_stream", 1)`; bracketed fields are named as written, without spaces:
    `"[mediapipe.FooOptions.ext]"`. A location is where the field's name is written, or the element
    itself in list syntax. Build one with `parse_graph_config`, `load_graph_config` or `from_proto`.
    """

    def __init__(
        self,
        proto: calculator_pb2.CalculatorGraphConfig,
        path: str | None = None,
        locations: dict[FieldPath, SourceLocation] | None = None,
        opaque: tuple[OpaqueRecord, ...] = (),
        subgraphs: dict[int, tuple[SubgraphUse, ...]] | None = None,
    ) -> None:
        self.proto = proto
        self.path = path
        self._locations = dict(locations or {})
        self._opaque = opaque
        self._subgraphs = dict(subgraphs or {})
        self._parts: dict[int, NodeParts] | None = None

    @classmethod
    def from_proto(
        cls, proto: calculator_pb2.CalculatorGraphConfig, path: str | None = None
    ) -> GraphConfig:
        """Wraps a graph built in code: it has no locations and no opaque blocks."""
        return cls(proto, path)

    def location(self, *field_path: str | int) -> SourceLocation | None:
        """Where `field_path` was written, else where its nearest recorded ancestor was."""
        for end in range(len(field_path), -1, -1):
            found = self._locations.get(field_path[:end])
            if found is not None:
                return found
        return None

    def subgraphs(self, node_index: int) -> tuple[SubgraphUse, ...]:
        """The subgraphs node `node_index` was expanded from, outermost first; () for a node the
        graph file itself lists."""
        return self._subgraphs.get(node_index, ())

    @property
    def has_subgraphs(self) -> bool:
        return bool(self._subgraphs)

    def option_entries(self, *owner_path: str | int) -> list[OptionsEntry]:
        """Every options block at the owner (a node, or () for the graph's own options)."""
        return self._entries(owner_path)

    def node_parts(self, index: int) -> NodeParts:
        if self._parts is None:  # grouped once: an expansion asks for every node
            self._parts = {}
            for path, location in self._locations.items():
                if len(path) > 1 and path[0] == "node" and isinstance(path[1], int):
                    self._part(path[1]).locations[path[2:]] = location
            for record in self._opaque:
                owner = record.owner
                if len(owner) > 1 and owner[0] == "node" and isinstance(owner[1], int):
                    self._part(owner[1]).opaque.append(_relative(record, owner[:2]))
        found = self._parts.get(index)
        return NodeParts(
            dict(found.locations) if found else {},
            list(found.opaque) if found else [],
            self.subgraphs(index),
        )

    def _part(self, index: int) -> NodeParts:
        assert self._parts is not None
        return self._parts.setdefault(index, NodeParts({}, []))

    def with_nodes(
        self,
        proto: calculator_pb2.CalculatorGraphConfig,
        parts: list[NodeParts],
    ) -> GraphConfig:
        """This graph's top level with `proto`'s nodes, each described by its `parts`."""
        locations = {p: loc for p, loc in self._locations.items() if p[:1] != ("node",)}
        opaque = [r for r in self._opaque if r.owner[:1] != ("node",)]
        for index, part in enumerate(parts):
            prefix: FieldPath = ("node", index)
            locations.update({(*prefix, *p): loc for p, loc in part.locations.items()})
            opaque += [_absolute(r, prefix) for r in part.opaque]
        subgraphs = {i: part.subgraphs for i, part in enumerate(parts) if part.subgraphs}
        return GraphConfig(proto, self.path, locations, tuple(opaque), subgraphs)

    def opaque_records(self, owner: FieldPath) -> list[OpaqueRecord]:
        """The opaque blocks inside `owner`: a node, or () for the graph outside its nodes."""
        if owner:
            return [r for r in self._opaque if r.owner[: len(owner)] == owner]
        return [r for r in self._opaque if r.owner[:1] != ("node",)]

    def opaque_options(self, *owner_path: str | int) -> tuple[OpaqueOptions, ...]:
        return tuple(e.opaque for e in self._entries(owner_path) if e.opaque is not None)

    def option_type_names(
        self, *owner_path: str | int
    ) -> tuple[tuple[str, SourceLocation | None], ...]:
        """Every options type given at the owner, so that a validator can spot one given twice.

        Any types are named by message ("mediapipe.FooOptions"), extensions by extension
        ("mediapipe.FooOptions.ext").
        """
        entries = sorted(
            self._entries(owner_path),
            key=lambda e: (e.location.line, e.location.column) if e.location else (sys.maxsize, 0),
        )
        return tuple((e.type_name, e.location) for e in entries)

    def decode_options(self, owner_path: FieldPath, message_type: type[M]) -> M | None:
        """The owner's options of `message_type`; an opaque block of that type is parsed only now.

        A node's `options` extension wins over a `node_options` Any of that type, as in MediaPipe.
        """
        full_name = message_type.DESCRIPTOR.full_name
        for entry in self._entries(owner_path):
            if entry.type_name != (f"{full_name}.ext" if entry.kind == "extension" else full_name):
                continue
            if entry.opaque is None:
                return message_type.FromString(entry.payload)
            try:
                return text_format.Parse(entry.opaque.text, message_type())
            except text_format.ParseError as error:
                raise _config_error(error, entry.opaque.text, entry.opaque.location) from None
        return None

    def _entries(self, owner: FieldPath) -> list[OptionsEntry]:
        entries: list[OptionsEntry] = []
        for source, kind in _option_sources(self.proto, owner):
            holder = _navigate(self.proto, source)
            if kind == "extension":
                entries += self._extension_entries(source, holder)
            else:
                entries += self._any_entries(source, holder)
        return entries

    def _extension_entries(self, source: FieldPath, holder: Message) -> list[OptionsEntry]:
        entries = []
        for field, value in holder.ListFields():
            if field.is_extension and field.message_type is not None:
                where = self.location(*source, f"[{field.full_name}]")
                entries.append(
                    OptionsEntry(field.full_name, "extension", where, value.SerializeToString())
                )
        return entries + [r.entry for r in self._opaque if r.owner == source and r.slot is None]

    def _any_entries(self, source: FieldPath, items: Any) -> list[OptionsEntry]:
        opaque = {record.slot: record.entry for record in self._opaque if record.slot is not None}
        entries = []
        for index, item in enumerate(items):
            slot = (*source, index)
            if slot in opaque:
                entries.append(opaque[slot])
            elif item.type_url:
                where = self.location(*slot, f"[{item.type_url}]")
                entries.append(
                    OptionsEntry(item.type_url.rpartition("/")[2], "any", where, item.value)
                )
        return entries


def canonical_node_names(nodes: Sequence[calculator_pb2.CalculatorGraphConfig.Node]) -> list[str]:
    """Each node's name, or its calculator's, with "_1", "_2"... where several share one
    (MediaPipe's CanonicalNodeName)."""
    base = [node.name or node.calculator for node in nodes]
    counts: dict[str, int] = {}
    for name in base:
        counts[name] = counts.get(name, 0) + 1
    seen: dict[str, int] = {}
    names = []
    for name in base:
        if counts[name] <= 1:
            names.append(name)
        else:
            seen[name] = seen.get(name, 0) + 1
            names.append(f"{name}_{seen[name]}")
    return names


def parse_graph_config(text: str, path: str | None = None) -> GraphConfig:
    """Parses graph text; `path` only names the file in locations and errors."""
    pool = descriptor_pool.Default()
    structure = StructureParser(text, path, pool)
    proto = calculator_pb2.CalculatorGraphConfig()
    blanked = structure.parse(_descriptor(proto))
    try:
        text_format.Parse(blanked, proto, descriptor_pool=pool)
    except text_format.ParseError as error:
        raise _config_error(error, blanked, SourceLocation(path, 1, 1)) from None
    for record in structure.opaque:
        # The blanked Any is left empty; its type URL keeps its index and type visible.
        target = _navigate(proto, record.slot) if record.slot is not None else None
        if target is not None:
            target.type_url = record.url
    return GraphConfig(proto, path, structure.locations, tuple(structure.opaque))


def load_graph_config(path: str | os.PathLike[str]) -> GraphConfig:
    """Reads and parses a graph file; every error carries the file's path."""
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise GraphConfigError(f"Cannot read graph file {name}: {error}") from None
    return parse_graph_config(text, name)
