"""Options messages as protobuf text, edited field by field, whether or not their type is known.

Subgraph expansion copies option fields from a graph's options into its nodes' options
(`option_value`), and MediaPipe's graphs do it with option types graphrt has no descriptor for
(`mediapipe.FaceDetectionOptions`). So the edits work on text: a message is a list of fields in
the order written, each holding a scalar as written or a nested message. Where the descriptor is
known it decides whether a field repeats; where it is not, a field written more than once in one
message repeats and any other is taken as singular, so the later of two values wins. That guess
is wrong for a repeated field given once on each side (a known type appends, this replaces).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf import descriptor_pool, message_factory, text_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from graphruntime.config_text import OptionsEntry, Token, tokenize
from graphruntime.errors import GraphConfigError, SourceLocation

_CLOSERS = {"{": "}", "<": ">"}


@dataclass
class TextField:
    name: str  # a field name, or "[extension.name]" as written
    value: str | TextMessage  # a scalar's text (strings keep their quotes), or a message


@dataclass
class TextMessage:
    fields: list[TextField] = field(default_factory=list)

    def values(self, name: str) -> list[str | TextMessage]:
        return [f.value for f in self.fields if f.name == name]

    def copy(self) -> TextMessage:
        return TextMessage(
            [
                TextField(f.name, f.value.copy() if isinstance(f.value, TextMessage) else f.value)
                for f in self.fields
            ]
        )

    def replace(self, name: str, values: list[str | TextMessage], index: int = -1) -> None:
        """Puts `values` where the field's values were (all of them, or the one at `index`)."""
        positions = [i for i, f in enumerate(self.fields) if f.name == name]
        if index >= 0:
            if index > len(positions):
                raise IndexError(f"option field {name!r} has no value at index {index}")
            positions = positions[index : index + 1]
        new = [TextField(name, value) for value in values]
        if not positions:
            self.fields.extend(new)
            return
        first = positions[0]
        kept = [f for i, f in enumerate(self.fields) if i not in positions[1:] and i != first]
        at = sum(1 for i in range(first) if i not in positions)
        self.fields = kept[:at] + new + kept[at:]

    def to_text(self, indent: int = 0) -> str:
        pad = "  " * indent
        lines = []
        for f in self.fields:
            if isinstance(f.value, TextMessage):
                inner = f.value.to_text(indent + 1)
                body = f"\n{inner}{pad}" if inner else ""
                lines.append(f"{pad}{f.name} {{{body}}}\n")
            else:
                lines.append(f"{pad}{f.name}: {f.value}\n")
        return "".join(lines)


def parse_text_message(text: str, location: SourceLocation | None = None) -> TextMessage:
    """Reads message text (already checked by the graph parser) into fields."""
    path = location.path if location else None
    tokens = tokenize(text, path)
    message, end = _fields(tokens, 0, None)
    if end != len(tokens):
        raise GraphConfigError(f"Unexpected {tokens[end].text!r} in options", location)
    return message


def _fields(tokens: list[Token], pos: int, closer: str | None) -> tuple[TextMessage, int]:
    message = TextMessage()
    while pos < len(tokens) and tokens[pos].text != closer:
        if tokens[pos].text == "[":
            end = next(i for i in range(pos, len(tokens)) if tokens[i].text == "]")
            name = "".join(t.text for t in tokens[pos : end + 1])
            pos = end + 1
        else:
            name, pos = tokens[pos].text, pos + 1
        if pos < len(tokens) and tokens[pos].text == ":":
            pos += 1
        if pos < len(tokens) and tokens[pos].text == "[":  # list syntax: one field per element
            pos += 1
            while tokens[pos].text != "]":
                value, pos = _value(tokens, pos)
                message.fields.append(TextField(name, value))
                if tokens[pos].text == ",":
                    pos += 1
            pos += 1
        else:
            value, pos = _value(tokens, pos)
            message.fields.append(TextField(name, value))
        if pos < len(tokens) and tokens[pos].text in (",", ";"):
            pos += 1
    return message, pos + (1 if closer else 0)


def _value(tokens: list[Token], pos: int) -> tuple[str | TextMessage, int]:
    token = tokens[pos]
    if token.text in _CLOSERS:
        return _fields(tokens, pos + 1, _CLOSERS[token.text])
    end = pos + 1
    while token.kind == "string" and end < len(tokens) and tokens[end].kind == "string":
        end += 1  # adjacent strings concatenate
    return " ".join(t.text for t in tokens[pos:end]), end


def entry_message_type(entry: OptionsEntry) -> str:
    if entry.kind == "any":
        return entry.type_name
    try:
        extension = descriptor_pool.Default().FindExtensionByName(entry.type_name)
    except KeyError:
        extension = None
    if extension is not None and extension.message_type is not None:
        return str(extension.message_type.full_name)
    return entry.type_name.removesuffix(".ext")


def message_descriptor(message_type: str) -> Descriptor | None:
    try:
        return descriptor_pool.Default().FindMessageTypeByName(message_type)
    except KeyError:
        return None


def entry_message(entry: OptionsEntry) -> TextMessage:
    """An options block as text fields, whether it was kept as text or decoded."""
    if entry.opaque is not None:
        return parse_text_message(entry.opaque.text, entry.opaque.location)
    desc = message_descriptor(entry_message_type(entry))
    assert desc is not None
    message = message_factory.GetMessageClass(desc).FromString(entry.payload)
    return parse_text_message(text_format.MessageToString(message))


def _field_descriptor(desc: Descriptor | None, name: str) -> FieldDescriptor | None:
    return desc.fields_by_name.get(name) if desc is not None else None


def merge(base: TextMessage, over: TextMessage, desc: Descriptor | None) -> TextMessage:
    """`over` merged into `base` as protobuf merges: singular fields replaced, repeated appended,
    messages merged."""
    result = base.copy()
    for name in dict.fromkeys(f.name for f in over.fields):
        values = over.values(name)
        fd = _field_descriptor(desc, name)
        if fd is not None and fd.is_repeated:
            result.fields.extend(TextField(name, v) for v in values)
            continue
        if fd is None and len(values) > 1:  # written twice: it repeats, and replaces as a list
            result.replace(name, values)
            continue
        previous = result.values(name)
        value = values[-1]
        if isinstance(value, TextMessage) and previous and isinstance(previous[-1], TextMessage):
            sub = fd.message_type if fd is not None else None
            value = merge(previous[-1], value, sub)
        result.replace(name, [value])
    return result


@dataclass(frozen=True)
class PathEntry:
    name: str
    index: int = -1  # -1: every value of the field


def parse_field_path(text: str) -> tuple[str | None, list[PathEntry]]:
    """MediaPipe's option path, "OPTIONS/Ext::Type/field/0/sub": (extension type, fields).

    A leading "OPTIONS" or "options" names the options message itself; a number indexes the field
    before it; "Ext::" picks which of several options messages (by type) the path starts in.
    """
    names = text.split("/")
    if names and names[0] == "OPTIONS":
        names = names[1:]
    if names and names[0] == "options":
        names = names[1:]
    extension: str | None = None
    entries: list[PathEntry] = []
    for name in names:
        if not name:
            continue
        if name.isdigit() and entries:
            entries[-1] = PathEntry(entries[-1].name, int(name))
        elif name.lower().startswith("ext::"):
            if entries:  # extensions below the top level are not part of the syntax graphrt reads
                raise ValueError(f'"{name}" can only start an option path')
            extension = name[5:]
        else:
            entries.append(PathEntry(name))
    return extension, entries


def get_values(message: TextMessage, path: list[PathEntry]) -> list[str | TextMessage]:
    """The values at `path`: all of a field's values, or the one its index names."""
    if not path:
        return [message]
    head, tail = path[0], path[1:]
    values = message.values(head.name)
    index = max(0, head.index) if tail else head.index
    if index >= len(values):
        raise IndexError(f"option field {head.name!r} has no value at index {index}")
    if tail:
        child = values[index]
        if not isinstance(child, TextMessage):
            raise ValueError(f"option field {head.name!r} is not a message")
        return get_values(child, tail)
    return values if index < 0 else [values[index]]


def merge_values(
    message: TextMessage,
    path: list[PathEntry],
    values: list[str | TextMessage],
    desc: Descriptor | None,
) -> TextMessage:
    """MediaPipe's MergeFieldValues: the field's values become `values`, message values merged
    over the ones they replace. Returns the new message (the whole one when `path` is empty)."""
    if not path:
        over = values[0]
        if not isinstance(over, TextMessage):
            raise ValueError("an options message can only take a message")
        return merge(message, over, desc)
    head, tail = path[0], path[1:]
    fd = _field_descriptor(desc, head.name)
    sub = fd.message_type if fd is not None else None
    result = message.copy()
    if tail:
        index = max(0, head.index)
        existing = result.values(head.name)
        child = existing[index] if index < len(existing) else TextMessage()
        if not isinstance(child, TextMessage):
            raise ValueError(f"option field {head.name!r} is not a message")
        result.replace(head.name, [merge_values(child, tail, values, sub)], index)
        return result
    previous = get_values(result, [head]) if result.values(head.name) else []
    merged = [
        merge(old, new, sub)
        if isinstance(old, TextMessage) and isinstance(new, TextMessage)
        else new
        for old, new in zip(previous, values, strict=False)
    ] + values[len(previous) :]
    result.replace(head.name, merged, head.index)
    return result
