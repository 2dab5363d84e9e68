"""The machinery shared by marker-delimited tool-call formats.

A tool stage reads content in which calls are embedded: plain text until an opening marker
(`<tool_call>`, `[TOOL_CALLS]`, `functools`, ...), then a body that a family-specific reader
consumes character by character until it knows the body is over, then text again. Readers
report calls to a CallSink as soon as they know them, which is what makes streaming
incremental; the stage deals with everything around them: markers split across pieces, the
family's special tokens, and whitespace that only served to lay out the markup.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servables.llm.output_parsers._markers import find_marker, partial_marker_length
from servables.llm.output_parsers.types import ParsedDelta, ToolCallDelta, new_call_id

__all__ = ["BodyReader", "CallSink", "Opening", "ToolStage"]

_WHITESPACE = " \t\n\r"


class CallSink:
    """Collects what readers find into the delta the current feed()/finish() returns."""

    __slots__ = ("_count", "_delta")

    def __init__(self) -> None:
        self._count = 0
        self._delta = ParsedDelta()

    def begin(self, name: str) -> int:
        """A new call whose name is known: its first delta (id + name); returns its index."""
        index = self._count
        self._count += 1
        self._delta.tool_calls.append(ToolCallDelta(index=index, id=new_call_id(), name=name))
        return index

    def arguments(self, index: int, text: str) -> None:
        if not text:
            return
        calls = self._delta.tool_calls
        if calls and calls[-1].index == index:
            calls[-1].arguments += text
        else:
            calls.append(ToolCallDelta(index=index, arguments=text))

    def content(self, text: str) -> None:
        self._delta.content += text

    def take(self) -> ParsedDelta:
        delta, self._delta = self._delta, ParsedDelta()
        return delta


class BodyReader(ABC):
    """Reads one body after an opening marker; created per body, fed until `done`.

    A reader that finds the body is not a call after all (and has not reported any call yet)
    sets `rejected_text` to everything it consumed, marker included: the stage puts it back
    into the content, so that no text is lost.
    """

    done: bool = False
    rejected_text: str | None = None

    @abstractmethod
    def feed(self, text: str, sink: CallSink) -> str:
        """Take the next text of the body; return what is left over once the body has ended.

        "" while the body goes on (the reader keeps what it still needs); once `done` is set,
        the text after the body, which belongs to what follows.
        """

    @abstractmethod
    def finish(self, sink: CallSink) -> None:
        """Generation ended inside the body: close the open call or give the text back."""


class ClosedBlockReader(BodyReader):
    """A body of calls read whole: kept up to its closing tag (or the end of generation), then
    every call reported with its arguments as JSON, or the block given back as content when
    `calls` finds it is not calls. Subclasses set `close_tag` and write `calls`."""

    close_tag: str

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self._raw = ""

    @abstractmethod
    def calls(self, block: str) -> list[tuple[str, dict[str, Any]]]:
        """(name, arguments) of every call in the block's text; ValueError if it is not calls."""

    def feed(self, text: str, sink: CallSink) -> str:
        self._raw += text
        end = self._raw.find(self.close_tag)
        if end < 0:
            return ""
        rest = self._raw[end + len(self.close_tag) :]
        self._raw = self._raw[:end]
        self._report(sink)
        return rest

    def finish(self, sink: CallSink) -> None:
        self._report(sink)

    def _report(self, sink: CallSink) -> None:
        self.done = True
        try:
            calls = self.calls(self._raw)
        except ValueError:
            self.rejected_text = self._marker + self._raw  # the closing tag is not content
            return
        for name, arguments in calls:
            index = sink.begin(name)
            sink.arguments(index, json.dumps(arguments, ensure_ascii=False))


ReaderFactory = Callable[[str, Mapping[str, Mapping[str, Any]]], BodyReader]
"""(marker text to give back with a rejected body, tool name -> parameters schema) -> reader.
The text is "" when the marker is part of the body (the reader consumes it itself) or a special
token (never content)."""


@dataclass(frozen=True)
class Opening:
    """A marker that starts a body."""

    marker: str
    reader: ReaderFactory
    leading_only: bool = False
    """Only at the start of the output (after whitespace): tagless forms such as a bare `{`."""
    part_of_body: bool = False
    """The marker is the body's own first characters (`{`, `[`), handed to the reader."""
    special_token: bool = False
    """The marker is a special token: a body that is not a call is given back without it."""

    def make_reader(self, schemas: Mapping[str, Mapping[str, Any]]) -> BodyReader:
        given_back = "" if self.part_of_body or self.special_token else self.marker
        return self.reader(given_back, schemas)


class ToolStage:
    """Content with embedded tool calls in, content and call deltas out (one per sequence).

    `dropped` are markers removed wherever they appear in content: the family's closing markers
    (a stray `</tool_call>`) and, for families fed with special tokens kept, the special tokens
    that are not markup (end of turn, end of text). Whitespace next to markup is layout, not
    content: it is dropped before an opening marker and after a body or dropped marker.
    """

    def __init__(
        self,
        openings: tuple[Opening, ...],
        dropped: tuple[str, ...],
        schemas: Mapping[str, Mapping[str, Any]],
    ) -> None:
        self._openings = {item.marker: item for item in openings if not item.leading_only}
        self._leading = {item.marker: item for item in openings if item.leading_only}
        self._dropped = dropped
        self._markers = (*self._openings, *dropped)
        self._schemas = schemas
        self._sink = CallSink()
        self._buffer = ""
        self._reader: BodyReader | None = None
        self._at_start = bool(self._leading)
        self._pending_space = ""
        self._space_before_body = ""
        self._after_markup = False

    def feed(self, text: str) -> ParsedDelta:
        self._buffer += text
        self._run(final=False)
        return self._sink.take()

    def finish(self) -> ParsedDelta:
        self._run(final=True)
        self._sink.content(self._pending_space)
        self._pending_space = ""
        return self._sink.take()

    def _run(self, *, final: bool) -> None:
        while True:
            if self._reader is not None:
                self._buffer = self._reader.feed(self._buffer, self._sink)
                if not self._reader.done:
                    if not final:
                        return
                    self._reader.finish(self._sink)
                rejected = self._reader.rejected_text
                self._reader = None
                if rejected is None:
                    self._after_markup = True
                else:
                    self._pending_space, self._after_markup = self._space_before_body, False
                    self._content(rejected)
                continue
            if self._at_start:
                if not self._open_leading(final=final):
                    return
                continue
            if not self._scan(final=final):
                return

    def _open_leading(self, *, final: bool) -> bool:
        """At the output's start: open a tagless body, or decide there is none (False: wait)."""
        stripped = self._buffer.lstrip(_WHITESPACE)
        if not stripped:
            if final:
                self._at_start = False
                return True
            return False
        for marker, opening in self._leading.items():
            if stripped.startswith(marker):
                self._at_start = False
                self._space_before_body = self._buffer[: len(self._buffer) - len(stripped)]
                self._buffer = stripped if opening.part_of_body else stripped[len(marker) :]
                self._reader = opening.make_reader(self._schemas)
                return True
        if not final and any(marker.startswith(stripped) for marker in self._leading):
            return False
        self._at_start = False
        return True

    def _scan(self, *, final: bool) -> bool:
        """Release content up to the next marker and act on it; False when waiting for text."""
        found = find_marker(self._buffer, self._markers)
        if found is None:
            keep = 0 if final else partial_marker_length(self._buffer, self._markers)
            self._content(self._buffer[: len(self._buffer) - keep])
            self._buffer = self._buffer[len(self._buffer) - keep :]
            return False
        position, marker = found
        self._content(self._buffer[:position])
        self._space_before_body, self._pending_space = self._pending_space, ""
        self._after_markup = True
        opening = self._openings.get(marker)
        if opening is None:
            self._buffer = self._buffer[position + len(marker) :]
        else:
            start = position if opening.part_of_body else position + len(marker)
            self._buffer = self._buffer[start:]
            self._reader = opening.make_reader(self._schemas)
        return True

    def _content(self, text: str) -> None:
        if self._after_markup:
            text = text.lstrip(_WHITESPACE)
            if not text:
                return
            self._after_markup = False
        text = self._pending_space + text
        released = text.rstrip(_WHITESPACE)
        self._pending_space = text[len(released) :]
        self._sink.content(released)
