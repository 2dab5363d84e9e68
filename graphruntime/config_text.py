"""The structural pass over graph text that protobuf's text parser cannot make.

`text_format.Parse` reports no positions and rejects option blocks whose type is not in the
descriptor pool. `StructureParser` walks the text alongside the descriptors first, with the token
classes of protobuf's own tokenizer: it records where every field occurrence is written, and cuts
the option blocks of unknown types out of a copy of the text (blanked with spaces so that lines
and columns stay put), keeping each as an `OpaqueOptions`. graphruntime.config then lets protobuf
parse the blanked copy and puts the two together in a `GraphConfig`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, NamedTuple

from google.protobuf.descriptor import Descriptor
from google.protobuf.descriptor_pool import DescriptorPool

from graphruntime.errors import GraphConfigError, SourceLocation

FieldPath = tuple[str | int, ...]
OptionsKind = Literal["any", "extension"]

ANY_TYPE = "google.protobuf.Any"
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


@dataclass(frozen=True)
class OpaqueOptions:
    """An options block of a type the runtime did not know when the graph was parsed.

    It stays text until a calculator that knows the type asks for it, so its errors surface then.
    """

    type_name: str
    kind: OptionsKind
    text: str
    location: SourceLocation


class Token(NamedTuple):
    kind: str
    text: str
    start: int
    end: int
    line: int
    column: int


@dataclass(frozen=True)
class OptionsEntry:
    """One options type given at an owner: known (as wire bytes) or opaque."""

    type_name: str
    kind: OptionsKind
    location: SourceLocation | None
    payload: bytes = b""
    opaque: OpaqueOptions | None = None


@dataclass(frozen=True)
class OpaqueRecord:
    owner: FieldPath
    slot: FieldPath | None  # the Any message the block was cut out of; None for an extension
    url: str
    entry: OptionsEntry


def tokenize(text: str, path: str | None) -> list[Token]:
    tokens: list[Token] = []
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
        tokens.append(Token(kind, value, match.start(), match.end(), line, column))
    return tokens


class StructureParser:
    """Walks the text once, alongside the descriptors, to learn what text_format does not tell.

    A `desc` of None means the walk is inside something untracked (an opaque block or a field
    protobuf will reject): only the syntax is checked there.
    """

    def __init__(self, text: str, path: str | None, pool: DescriptorPool) -> None:
        self._text, self._path, self._pool = text, path, pool
        self._tokens = tokenize(text, path)
        self._pos = 0
        self._counts: dict[tuple[FieldPath, str], int] = {}
        self._blanks: list[tuple[int, int]] = []
        self.locations: dict[FieldPath, SourceLocation] = {}
        self.opaque: list[OpaqueRecord] = []

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
        at: Token,
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
        self, desc: Descriptor | None, path: FieldPath, name: str, repeated: bool, at: Token
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

    def _block(self, desc: Descriptor | None, path: FieldPath, opener: Token, label: str) -> Token:
        closer = _CLOSERS[opener.text]
        while (token := self._peek()) is None or not self._is(token, closer):
            if token is None:
                message = f'Expected "{closer}" to close "{label}" opened at line {opener.line}'
                raise self._error(message, None)
            self._field(desc, path)
        self._pos += 1
        return token

    def _bracketed_field(self, desc: Descriptor | None, path: FieldPath, opener: Token) -> None:
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
        self, path: FieldPath, kind: OptionsKind, name: str, opener: Token, brace: Token
    ) -> None:
        """Records a block of unknown type and blanks it, from "[" to its trailing separator."""
        closer = self._block(None, (), brace, f"[{name}]")
        separator = self._accept(",", ";")
        self._blanks.append((opener.start, separator.end if separator else closer.end))
        body = self._text[brace.end : closer.start]
        start = SourceLocation(self._path, brace.line, brace.column + 1)
        options = OpaqueOptions(name.rpartition("/")[2], kind, body, start)
        entry = OptionsEntry(options.type_name, kind, self._location(opener), opaque=options)
        # An Any's owner is the repeated field holding it; an extension's is the extended message.
        in_list = kind == "any" and bool(path) and isinstance(path[-1], int)
        slot = path if kind == "any" else None
        self.opaque.append(OpaqueRecord(path[:-1] if in_list else path, slot, name, entry))

    def _bracket_name(self, opener: Token) -> str:
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
        if desc is None or not (
            desc.full_name == ANY_TYPE if kind == "any" else desc.is_extendable
        ):
            return None, False
        try:
            if kind == "any":
                return self._pool.FindMessageTypeByName(name.rpartition("/")[2]), False
            extension = self._pool.FindExtensionByName(name)
            return extension.message_type, extension.is_repeated
        except KeyError:
            return None

    def _peek(self) -> Token | None:
        return self._tokens[self._pos] if self._pos < len(self._tokens) else None

    def _next(self, expected: str) -> Token:
        token = self._peek()
        if token is None:
            raise self._error(f"Expected {expected} but the text ended", None)
        self._pos += 1
        return token

    @staticmethod
    def _is(token: Token, symbol: str) -> bool:
        return token.kind == "symbol" and token.text == symbol

    def _accept(self, *symbols: str) -> Token | None:
        token = self._peek()
        if token is None or token.kind != "symbol" or token.text not in symbols:
            return None
        self._pos += 1
        return token

    def _expect(self, symbol: str) -> None:
        token = self._next(f'"{symbol}"')
        if not self._is(token, symbol):
            raise self._error(f'Expected "{symbol}" but found {token.text!r}', token)

    def _location(self, token: Token) -> SourceLocation:
        return SourceLocation(self._path, token.line, token.column)

    def _error(self, message: str, token: Token | None) -> GraphConfigError:
        """An error at `token`, or at the last token when the text ended too soon."""
        return GraphConfigError(message, self._location(token or self._tokens[-1]))
