"""Reading graph.pbtxt files into CalculatorGraphConfig messages.

`text_format.Parse` alone is not enough for a graph runtime: it reports no positions, so the
validator could not say `FILE:LINE: message` about a node or a stream, and it rejects any
`[type.googleapis.com/mediapipe.FooOptions]` or `[mediapipe.FooOptions.ext]` block whose type is not
in the descriptor pool, although a graph must load before (or without) the calculators that define
those types. So a small structural pass walks the text alongside the descriptors first: it
records where every field occurrence is, and cuts the option blocks of unknown types out of a copy
of the text (blanked with spaces so that lines and columns stay put) to keep them as opaque text.
protobuf's own parser then reads the blanked copy, so it still converts every scalar, enum and
escape itself.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

from google.protobuf import descriptor_pool, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message import Message

# stream_handler_options_pb2 is imported for its extensions of MediaPipeOptions.
from graphruntime._proto import calculator_pb2, stream_handler_options_pb2  # noqa: F401
from graphruntime.errors import GraphConfigError, SourceLocation

# The LLM calculator's options are loaded so OVMS graphs get real messages, but the runtime itself
# must not depend on any calculator package being installed.
with contextlib.suppress(ImportError):
    importlib.import_module("calculators.llm.llm_calculator_pb2")

M = TypeVar("M", bound=Message)
FieldPath = tuple[str | int, ...]
OptionsKind = Literal["any", "extension"]

_ANY = "google.protobuf.Any"
_CLOSERS = {"{": "}", "<": ">"}
_VALUE_KINDS = ("ident", "number", "string")
# The token classes of protobuf's own text tokenizer, so that both passes split the text alike.
_TOKEN_RE = re.compile(
    r"(?P<space>\s+)|(?P<comment>#[^\n]*)"
    r"|(?P<ident>[A-Za-z_][0-9A-Za-z_+-]*)"
    r"|(?P<number>(?:[0-9+-]|\.[0-9])[0-9A-Za-z_.+-]*)"
    r"|(?P<string>\"[^\"\n\\]*(?:\\.[^\"\n\\]*)*\"|'[^'\n\\]*(?:\\.[^'\n\\]*)*')"
    r"|(?P<quote>[\"'])|(?P<symbol>.)"
)
# An extension's full name, or an Any type URL with the three-part host protobuf insists on.
_BRACKET_NAME_RE = re.compile(r"(?:{w} \. {w} \. {w} / )?{w}(?: \. {w})*".format(w=r"\w\S*"))
_PROTOBUF_POSITION = re.compile(r"^\d+(?::\d+)? : ")


@dataclass(frozen=True)
class OpaqueOptions:
    """An options block of a type the runtime did not know when the graph was parsed.

    It stays text until a calculator that knows the type asks for it, so its errors surface then.
    """

    type_name: str
    kind: OptionsKind
    text: str
    location: SourceLocation


class _Token(NamedTuple):
    kind: str
    text: str
    start: int
    end: int
    line: int
    column: int


@dataclass(frozen=True)
class _Entry:
    """One options type given at an owner: known (as wire bytes) or opaque."""

    type_name: str
    kind: OptionsKind
    location: SourceLocation | None
    payload: bytes = b""
    opaque: OpaqueOptions | None = None


@dataclass(frozen=True)
class _OpaqueRecord:
    owner: FieldPath
    slot: FieldPath | None  # the Any message the block was cut out of; None for an extension
    url: str
    entry: _Entry


def _tokenize(text: str, path: str | None) -> list[_Token]:
    tokens: list[_Token] = []
    line, line_start = 1, 0
    for match in _TOKEN_RE.finditer(text):
        kind, value = match.lastgroup or "symbol", match.group()
        column = match.start() - line_start + 1
        if kind == "quote":
            location = SourceLocation(path, line, column)
            raise GraphConfigError("String is missing its closing quote", location)
        if kind in ("space", "comment"):
            # Lines end at "\n" only, as in protobuf's tokenizer, so both count lines alike.
            if "\n" in value:
                line += value.count("\n")
                line_start = match.start() + value.rindex("\n") + 1
            continue
        tokens.append(_Token(kind, value, match.start(), match.end(), line, column))
    return tokens


class _StructureParser:
    """Walks the text once, alongside the descriptors, to learn what text_format does not tell.

    A `desc` of None means the walk is inside something untracked (an opaque block or a field
    protobuf will reject): only the syntax is checked there.
    """

    def __init__(self, text: str, path: str | None, pool: DescriptorPool) -> None:
        self._text, self._path, self._pool = text, path, pool
        self._tokens = _tokenize(text, path)
        self._pos = 0
        self._counts: dict[tuple[FieldPath, str], int] = {}
        self._blanks: list[tuple[int, int]] = []
        self.locations: dict[FieldPath, SourceLocation] = {}
        self.opaque: list[_OpaqueRecord] = []

    def parse(self, root: Descriptor) -> str:
        """Returns the text with the opaque blocks blanked out."""
        while self._pos < len(self._tokens):
            self._field(root, ())
        pieces, done = [], 0
        for start, end in self._blanks:
            pieces += [self._text[done:start], re.sub(r"[^\n]", " ", self._text[start:end])]
            done = end
        return "".join([*pieces, self._text[done:]])

    def _field(self, desc: Descriptor | None, path: FieldPath) -> None:
        name = self._next("a field name")
        if self._is(name, "["):
            self._bracketed_field(desc, path, name)
            return
        if name.kind != "ident":
            raise self._error(f"Expected a field name but found {name.text!r}", name)
        field = desc.fields_by_name.get(name.text) if desc is not None else None
        self._accept(":")
        if field is None:
            self._values(desc, path, name.text, None, False, name)
        else:
            self._values(desc, path, name.text, field.message_type, field.is_repeated, name)

    def _values(
        self,
        desc: Descriptor | None,
        path: FieldPath,
        label: str,
        sub: Descriptor | None,
        repeated: bool,
        at: _Token,
    ) -> None:
        """One value, or a list of them with one slot (index) per element."""
        if self._accept("["):
            while not self._accept("]"):
                self._value(sub, self._slot(desc, path, label, repeated, self._peek() or at), label)
                if not self._accept(","):
                    self._expect("]")
                    break
        else:
            self._value(sub, self._slot(desc, path, label, repeated, at), label)
        self._accept(",", ";")

    def _slot(
        self, desc: Descriptor | None, path: FieldPath, name: str, repeated: bool, at: _Token
    ) -> FieldPath:
        slot: FieldPath = (*path, name)
        if repeated:
            index = self._counts.get((path, name), 0)
            self._counts[(path, name)] = index + 1
            slot = (*slot, index)
        if desc is not None:
            self.locations.setdefault(slot, self._location(at))
        return slot

    def _value(self, desc: Descriptor | None, path: FieldPath, label: str) -> None:
        token = self._next(f'a value for "{label}"')
        if token.kind == "symbol" and token.text in _CLOSERS:
            self._block(desc, path, token, label)
        elif token.kind == "string":
            while (following := self._peek()) is not None and following.kind == "string":
                self._pos += 1  # adjacent strings concatenate
        elif token.kind not in _VALUE_KINDS:
            raise self._error(f'Expected a value for "{label}" but found {token.text!r}', token)

    def _block(
        self, desc: Descriptor | None, path: FieldPath, opener: _Token, label: str
    ) -> _Token:
        closer = _CLOSERS[opener.text]
        while (token := self._peek()) is None or not self._is(token, closer):
            if token is None:
                message = f'Expected "{closer}" to close "{label}" opened at line {opener.line}'
                raise self._error(message, None)
            self._field(desc, path)
        self._pos += 1
        return token

    def _bracketed_field(self, desc: Descriptor | None, path: FieldPath, opener: _Token) -> None:
        name = self._bracket_name(opener)
        self._accept(":")
        kind: OptionsKind = "any" if "/" in name else "extension"
        resolved = self._resolve(desc, kind, name)
        value = self._peek()
        if resolved is None and value is not None and value.text in _CLOSERS:
            self._pos += 1
            self._cut_opaque(path, kind, name, opener, value)
            return
        sub, repeated = resolved or (None, False)
        self._values(desc, path, f"[{name}]", sub, repeated, opener)

    def _cut_opaque(
        self, path: FieldPath, kind: OptionsKind, name: str, opener: _Token, brace: _Token
    ) -> None:
        """Records a block of unknown type and blanks it, from "[" to its trailing separator."""
        closer = self._block(None, (), brace, f"[{name}]")
        separator = self._accept(",", ";")
        self._blanks.append((opener.start, separator.end if separator else closer.end))
        body = self._text[brace.end : closer.start]
        start = SourceLocation(self._path, brace.line, brace.column + 1)
        options = OpaqueOptions(name.rpartition("/")[2], kind, body, start)
        entry = _Entry(options.type_name, kind, self._location(opener), opaque=options)
        # An Any's owner is the repeated field holding it; an extension's is the extended message.
        in_list = kind == "any" and bool(path) and isinstance(path[-1], int)
        slot = path if kind == "any" else None
        self.opaque.append(_OpaqueRecord(path[:-1] if in_list else path, slot, name, entry))

    def _bracket_name(self, opener: _Token) -> str:
        words = []
        while not self._is(token := self._next(f'"]" to close "[" at line {opener.line}'), "]"):
            if token.kind != "ident" and token.text not in (".", "/"):
                raise self._error(f'Expected "]" to close "[" but found {token.text!r}', token)
            words.append(token.text)
        name = " ".join(words)  # spaced so that two names in a row cannot pass for one
        if not _BRACKET_NAME_RE.fullmatch(name):
            raise self._error(f"Malformed name {self._text[opener.start : token.end]!r}", opener)
        return name.replace(" ", "")

    def _resolve(
        self, desc: Descriptor | None, kind: OptionsKind, name: str
    ) -> tuple[Descriptor | None, bool] | None:
        """A bracketed field's value descriptor and whether it repeats; None if its type is unknown.

        Misplaced brackets count as known, so that protobuf reports them in its own words.
        """
        if desc is None or not (desc.full_name == _ANY if kind == "any" else desc.is_extendable):
            return None, False
        try:
            if kind == "any":
                return self._pool.FindMessageTypeByName(name.rpartition("/")[2]), False
            extension = self._pool.FindExtensionByName(name)
            return extension.message_type, extension.is_repeated
        except KeyError:
            return None

    def _peek(self) -> _Token | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _next(self, expected: str) -> _Token:
        token = self._peek()
        if token is None:
            raise self._error(f"Expected {expected} but the text ended", None)
        self._pos += 1
        return token

    @staticmethod
    def _is(token: _Token, symbol: str) -> bool:
        return token.kind == "symbol" and token.text == symbol

    def _accept(self, *symbols: str) -> _Token | None:
        token = self._peek()
        if token is None or token.kind != "symbol" or token.text not in symbols:
            return None
        self._pos += 1
        return token

    def _expect(self, symbol: str) -> None:
        token = self._next(f'"{symbol}"')
        if not self._is(token, symbol):
            raise self._error(f'Expected "{symbol}" but found {token.text!r}', token)

    def _location(self, token: _Token) -> SourceLocation:
        return SourceLocation(self._path, token.line, token.column)

    def _error(self, message: str, token: _Token | None) -> GraphConfigError:
        """An error at `token`, or at the last token when the text ended too soon."""
        return GraphConfigError(message, self._location(token or self._tokens[-1]))


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
    return message_type is not None and message_type.full_name == _ANY


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
        opaque: tuple[_OpaqueRecord, ...] = (),
    ) -> None:
        self.proto = proto
        self.path = path
        self._locations = dict(locations or {})
        self._opaque = opaque

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

    def _entries(self, owner: FieldPath) -> list[_Entry]:
        entries: list[_Entry] = []
        for source, kind in _option_sources(self.proto, owner):
            holder = _navigate(self.proto, source)
            if kind == "extension":
                entries += self._extension_entries(source, holder)
            else:
                entries += self._any_entries(source, holder)
        return entries

    def _extension_entries(self, source: FieldPath, holder: Message) -> list[_Entry]:
        entries = []
        for field, value in holder.ListFields():
            if field.is_extension and field.message_type is not None:
                where = self.location(*source, f"[{field.full_name}]")
                entries.append(
                    _Entry(field.full_name, "extension", where, value.SerializeToString())
                )
        return entries + [r.entry for r in self._opaque if r.owner == source and r.slot is None]

    def _any_entries(self, source: FieldPath, items: Any) -> list[_Entry]:
        opaque = {record.slot: record.entry for record in self._opaque if record.slot is not None}
        entries = []
        for index, item in enumerate(items):
            slot = (*source, index)
            if slot in opaque:
                entries.append(opaque[slot])
            elif item.type_url:
                where = self.location(*slot, f"[{item.type_url}]")
                entries.append(_Entry(item.type_url.rpartition("/")[2], "any", where, item.value))
        return entries


def parse_graph_config(text: str, path: str | None = None) -> GraphConfig:
    """Parses graph text; `path` only names the file in locations and errors."""
    pool = descriptor_pool.Default()
    structure = _StructureParser(text, path, pool)
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
