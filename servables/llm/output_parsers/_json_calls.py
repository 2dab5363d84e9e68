"""Readers for calls written as JSON: `{"name": ..., "arguments": {...}}` objects, alone, in a
`[...]` list or separated by `;`, and bare arguments after a name given by the markup.

The call's first delta goes out as soon as its name is known and its arguments have begun, and
the arguments' text follows character by character as it is checked (see _json). A body that
turns out not to be a call before any call was reported is given back as content.

It stays one module (over 400 lines) because its parts are one mechanism: the readers drive
_CallObject through a private protocol (_Feed, the raw text kept for giving back, the moment a
call may begin) and share ArgumentStream, the name rules and the whitespace set; split apart,
that protocol would have to become public between modules for no reader outside this one.
"""

from __future__ import annotations

import enum
import re

from servables.llm.output_parsers._json import JsonScanner, loads_or_none
from servables.llm.output_parsers._markers import partial_marker_length
from servables.llm.output_parsers._stage import BodyReader, CallSink, ReaderFactory

__all__ = ["ArgumentStream", "JsonCallsReader", "Layout", "NamedArgumentsReader"]

_WHITESPACE = " \t\n\r"
_NAME = re.compile(r"[\w.\-]+")
_NAME_PREFIX = re.compile(r"\s*[\w.\-]*")
_MAX_NAME = 256
NAME_KEYS = ("name",)
ARGUMENT_KEYS = ("arguments", "parameters")


class ArgumentStream:
    """One JSON arguments value, sent to its call as fast as it is checked.

    Until `attach` names the call, checked text is kept; whitespace before the value is
    skipped. `close` sends the rest and, if the value was cut off, what completes it ("{}"
    when there was no value at all), so the concatenated fragments are always valid JSON.
    """

    __slots__ = ("_index", "_scanner", "_sent", "_text")

    def __init__(self) -> None:
        self._scanner = JsonScanner()
        self._text = ""
        self._sent = 0
        self._index: int | None = None

    def finished(self) -> bool:
        """The value is complete (a method, not a property: it changes as characters come)."""
        return self._scanner.done

    @property
    def started(self) -> bool:
        return bool(self._text)

    def feed(self, char: str, sink: CallSink) -> bool | None:
        """True: consumed. False: the value had ended before `char`. None: syntax error."""
        if not self._text and char in _WHITESPACE:
            return True
        out = self._scanner.feed(char)
        if out is None:
            return False if self._scanner.done else None
        self._text += out
        self._send(sink)
        return True

    def attach(self, index: int, sink: CallSink) -> None:
        self._index = index
        self._send(sink)

    def close(self, sink: CallSink) -> None:
        assert self._index is not None, "arguments closed before their call began"
        if not self._text:
            sink.arguments(self._index, "{}")
            return
        safe = len(self._text) - self._scanner.held
        sink.arguments(self._index, self._text[self._sent : safe] + self._scanner.completion())
        self._sent = len(self._text)

    def _send(self, sink: CallSink) -> None:
        if self._index is None:
            return
        safe = len(self._text) - self._scanner.held
        if safe > self._sent:
            sink.arguments(self._index, self._text[self._sent : safe])
            self._sent = safe


class _Feed(enum.Enum):
    CONSUMED = enum.auto()
    ENDED = enum.auto()  # the object had ended before this character
    ERROR = enum.auto()


def _arguments_from_value(text: str) -> str:
    """Arguments given as something other than an object, as the JSON text to send.

    A JSON string holding an object's text (some models encode the arguments twice) is
    unwrapped; null means no arguments; anything else is passed on as written.
    """
    value = loads_or_none(text)
    if value is None:
        return "{}"
    if isinstance(value, str):
        inner = loads_or_none(value)
        return value if isinstance(inner, dict) else text
    return text


class _CallObject:
    """One `{"name": ..., "arguments": ...}` object, fed character by character."""

    __slots__ = (
        "_arguments",
        "_buffered_arguments",
        "_inner",
        "_inner_key",
        "_inner_text",
        "_outer",
        "_require_arguments",
        "_sink",
        "index",
        "name",
        "raw",
    )

    def __init__(self, sink: CallSink, *, require_arguments: bool) -> None:
        self._sink = sink
        self._require_arguments = require_arguments
        self._outer = JsonScanner()
        self._inner: JsonScanner | None = None
        self._inner_key: str | None = None
        self._inner_text = ""
        self._arguments: ArgumentStream | None = None
        self._buffered_arguments: str | None = None
        self.name: str | None = None
        self.index: int | None = None
        self.raw: list[str] = []

    @property
    def complete(self) -> bool:
        return self._outer.done

    def feed(self, char: str) -> _Feed:
        result = self._feed(char)
        if result is _Feed.CONSUMED:
            self.raw.append(char)
        return result

    def _feed(self, char: str) -> _Feed:
        if self._arguments is not None and not self._arguments.finished():
            status = self._arguments.feed(char, self._sink)
            if status is None:
                return _Feed.ERROR
            if status:
                if self._arguments.finished():
                    self._outer.skip_value()
                return _Feed.CONSUMED
            self._outer.skip_value()
        elif self._inner is not None:
            out = self._inner.feed(char)
            if out is not None:
                self._inner_text += out
                if self._inner.done:
                    self._close_inner()
                return _Feed.CONSUMED
            if not self._inner.done:
                return _Feed.ERROR
            self._close_inner()
        if self._outer.expects_value and self._outer.depth == 1 and char not in _WHITESPACE:
            return self._open_value(char)
        out = self._outer.feed(char)
        if out is None:
            return _Feed.ENDED if self._outer.done else _Feed.ERROR
        return _Feed.CONSUMED

    def _open_value(self, char: str) -> _Feed:
        key = self._outer.last_key
        if key in ARGUMENT_KEYS and self._arguments is None and char == "{":
            self._arguments = ArgumentStream()
            self._arguments.feed(char, self._sink)
            self._begin_if_ready()
            return _Feed.CONSUMED
        self._inner = JsonScanner()
        self._inner_key = key
        self._inner_text = ""
        out = self._inner.feed(char)
        if out is None:
            self._inner = None
            return _Feed.ERROR
        self._inner_text = out
        if key in ARGUMENT_KEYS:
            self._begin_if_ready()
        return _Feed.CONSUMED

    def _close_inner(self) -> None:
        key, text = self._inner_key, self._inner_text
        self._inner = None
        self._outer.skip_value()
        if key in NAME_KEYS and self.name is None:
            value = loads_or_none(text)
            if isinstance(value, str) and value:
                self.name = value
                self._begin_if_ready()
        elif key in ARGUMENT_KEYS and self._arguments is None and self._buffered_arguments is None:
            self._buffered_arguments = _arguments_from_value(text)
            self._begin_if_ready()

    @property
    def _has_arguments(self) -> bool:
        return (
            self._arguments is not None
            or self._buffered_arguments is not None
            or (self._inner is not None and self._inner_key in ARGUMENT_KEYS)
        )

    def _begin_if_ready(self) -> None:
        if self.index is not None or self.name is None or not self._has_arguments:
            return
        self.index = self._sink.begin(self.name)
        if self._arguments is not None:
            self._arguments.attach(self.index, self._sink)

    def close(self, *, cut: bool) -> bool:
        """The object ended (or was cut off): report the call; False if it was not one."""
        if self.index is None:
            if self.name is None or (self._require_arguments and not self._has_arguments):
                return False
            self.index = self._sink.begin(self.name)
        if self._arguments is not None:
            self._arguments.attach(self.index, self._sink)
            self._arguments.close(self._sink)
        elif self._buffered_arguments is not None:
            self._sink.arguments(self.index, self._buffered_arguments)
        elif cut and self._inner is not None and self._inner_key in ARGUMENT_KEYS:
            arguments = self._inner_text + self._inner.completion()
            self._sink.arguments(self.index, _arguments_from_value(arguments))
        else:
            self._sink.arguments(self.index, "{}")
        return True


class Layout(enum.Enum):
    SINGLE = enum.auto()  # one object
    LIST = enum.auto()  # a JSON array of objects (a bare object is accepted too)
    SEMICOLONS = enum.auto()  # objects separated by ';'


class _Where(enum.Enum):
    BEFORE_OPEN = enum.auto()
    BEFORE_ELEMENT = enum.auto()
    FIRST_ELEMENT_OR_END = enum.auto()
    IN_ELEMENT = enum.auto()
    AFTER_ELEMENT = enum.auto()


class JsonCallsReader(BodyReader):
    """Call objects in one of the layouts families use."""

    def __init__(self, marker: str, layout: Layout, *, require_arguments: bool) -> None:
        self._marker = marker
        self._layout = layout
        self._require_arguments = require_arguments
        self._where = _Where.BEFORE_OPEN
        self._in_list = False
        self._object: _CallObject | None = None
        self._raw: list[str] = []
        self._reported = False

    @classmethod
    def factory(cls, layout: Layout, *, require_arguments: bool = False) -> ReaderFactory:
        def make(marker: str, _schemas: object) -> BodyReader:
            return cls(marker, layout, require_arguments=require_arguments)

        return make

    def feed(self, text: str, sink: CallSink) -> str:
        for position, char in enumerate(text):
            if not self._step(char, sink):
                self.done = True
                return text[position:]
            if self.done:
                return text[position + 1 :]
        return ""

    def finish(self, sink: CallSink) -> None:
        if self._object is not None:
            if self._object.close(cut=True):
                self._reported = True
            elif self._reported:
                sink.content("".join(self._object.raw))
        if not self._reported:
            self._reject()
        self.done = True

    def _reject(self) -> None:
        self.rejected_text = self._marker + "".join(self._raw)

    def _step(self, char: str, sink: CallSink) -> bool:
        """Take one character; False if it is not part of the body (the body is over)."""
        where = self._where
        if where is _Where.IN_ELEMENT:
            assert self._object is not None
            result = self._object.feed(char)
            if result is _Feed.CONSUMED:
                self._raw.append(char)
                if self._object.complete:
                    self._element_done(sink, cut=False)
                return True
            if result is _Feed.ENDED:
                self._element_done(sink, cut=False)
                return self._step(char, sink)
            self._element_done(sink, cut=True)
            return False
        if char in _WHITESPACE and where is not _Where.AFTER_ELEMENT:
            self._raw.append(char)
            return True
        if where is _Where.BEFORE_OPEN:
            if char == "[" and self._layout is Layout.LIST:
                self._in_list = True
                self._where = _Where.FIRST_ELEMENT_OR_END
                self._raw.append(char)
                return True
            return self._open_element(char, sink)
        if where in (_Where.BEFORE_ELEMENT, _Where.FIRST_ELEMENT_OR_END):
            if char == "]" and where is _Where.FIRST_ELEMENT_OR_END:
                self._raw.append(char)
                self.done = True
                if not self._reported:
                    self._reject()
                return True
            return self._open_element(char, sink)
        # AFTER_ELEMENT
        if char in _WHITESPACE:
            self._raw.append(char)
            return True
        separator = ";" if self._layout is Layout.SEMICOLONS else ","
        if char == separator and (self._in_list or self._layout is Layout.SEMICOLONS):
            self._raw.append(char)
            self._where = _Where.BEFORE_ELEMENT
            return True
        if char == "]" and self._in_list:
            self._raw.append(char)
            self.done = True
            return True
        self.done = True
        return False

    def _open_element(self, char: str, sink: CallSink) -> bool:
        if char != "{":
            if not self._reported:
                self._reject()
            self.done = True
            return False
        self._object = _CallObject(sink, require_arguments=self._require_arguments)
        self._where = _Where.IN_ELEMENT
        return self._step(char, sink)

    def _element_done(self, sink: CallSink, *, cut: bool) -> None:
        assert self._object is not None
        element, self._object = self._object, None
        if element.close(cut=cut):
            self._reported = True
        elif self._reported:
            sink.content("".join(element.raw))
        else:
            self._reject()
            self.done = True
            return
        if cut:
            self.done = True
            return
        if self._layout is Layout.SINGLE or (self._layout is Layout.LIST and not self._in_list):
            self.done = True
            return
        self._where = _Where.AFTER_ELEMENT


class NamedArgumentsReader(BodyReader):
    """`name<separator>{arguments}`: Devstral / Mistral-Small's `[TOOL_CALLS]name[ARGS]{...}`.

    The name ends at the separator; a character that cannot be part of a name means the body
    is not this form.
    """

    def __init__(self, marker: str, separator: str) -> None:
        self._marker = marker
        self._separator = separator
        self._name = ""
        self._raw: list[str] = []
        self._arguments: ArgumentStream | None = None
        self._index: int | None = None

    def feed(self, text: str, sink: CallSink) -> str:
        for position, char in enumerate(text):
            if self._arguments is None:
                if not self._name_char(char, sink):
                    self._reject_or_stop()
                    return text[position:]
                continue
            status = self._arguments.feed(char, sink)
            if status is True:
                if self._arguments.finished():
                    self._close(sink)
                    return text[position + 1 :]
                continue
            self._close(sink)
            return text[position:]
        return ""

    def finish(self, sink: CallSink) -> None:
        if self._arguments is None:
            self._reject_or_stop()
        else:
            self._close(sink)

    def _name_char(self, char: str, sink: CallSink) -> bool:
        pending = self._name + char
        if pending.endswith(self._separator):
            name = pending[: -len(self._separator)].strip()
            if not _NAME.fullmatch(name):
                return False
            self._raw.append(char)
            self._index = sink.begin(name)
            self._arguments = ArgumentStream()
            self._arguments.attach(self._index, sink)
            return True
        undecided = partial_marker_length(pending, (self._separator,))
        decided = pending[: len(pending) - undecided]
        if len(pending) > _MAX_NAME or not _NAME_PREFIX.fullmatch(decided):
            return False
        self._name = pending
        self._raw.append(char)
        return True

    def _reject_or_stop(self) -> None:
        self.rejected_text = self._marker + "".join(self._raw)
        self.done = True

    def _close(self, sink: CallSink) -> None:
        assert self._arguments is not None
        self._arguments.close(sink)
        self.done = True
