"""gpt-oss's harmony format (OVMS's `gptoss`, for both tools and reasoning).

    <|channel|>analysis<|message|>The user asks for the weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json
        <|message|>{"city": "Paris"}<|call|>           (one line in the output)
    <|start|>assistant<|channel|>final<|message|>It is sunny.<|return|>

Every message has a header (role, `<|channel|>` name, optional recipient `to=functions.NAME`
and `<|constrain|>` type) and a body ended by `<|end|>`, `<|call|>` or `<|return|>`. The
`analysis` channel is reasoning; `final` is the answer and `commentary` without a recipient is a
preamble meant for the user, both content (joined by a space, as OVMS does); a message to
`functions.NAME` is a call whose body is the JSON arguments, streamed as it comes. The markers
are special tokens, so this parser needs the text decoded with special tokens kept.
"""

from __future__ import annotations

import enum
import re

from servables.llm.output_parsers._json_calls import ArgumentStream
from servables.llm.output_parsers._markers import find_marker, partial_marker_length
from servables.llm.output_parsers._stage import CallSink
from servables.llm.output_parsers.base import OutputParser
from servables.llm.output_parsers.types import ParsedDelta

__all__ = ["HarmonyParser"]

START = "<|start|>"
CHANNEL = "<|channel|>"
CONSTRAIN = "<|constrain|>"
MESSAGE = "<|message|>"
MESSAGE_ENDS = ("<|end|>", "<|return|>", "<|call|>")
OTHER_SPECIAL = ("<|endoftext|>",)
MARKERS = (START, CHANNEL, CONSTRAIN, MESSAGE, *MESSAGE_ENDS, *OTHER_SPECIAL)
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_WHITESPACE = " \t\n\r"
# A header is a few words; text that goes on longer without <|message|> is not a header (a
# model that ignores the format), and is released as content rather than held forever.
_MAX_HEADER = 256


class _Body(enum.Enum):
    NONE = enum.auto()  # between messages: header text
    CONTENT = enum.auto()
    REASONING = enum.auto()
    DROPPED = enum.auto()  # analysis when reasoning is not wanted
    CALL = enum.auto()


class HarmonyParser(OutputParser):
    keep_special_tokens = True

    def __init__(self, *, tools: bool, reasoning: bool) -> None:
        self._tools = tools
        self._reasoning = reasoning
        self._sink = CallSink()
        self._buffer = ""
        self._body = _Body.NONE
        self._header = ""
        self._channel = ""
        self._in_channel = False
        self._arguments: ArgumentStream | None = None
        self._wrote_content = False
        self._wrote_reasoning = False
        self._message_started = False
        self._reasoning_out = ""
        self._seen_marker = False

    def feed(self, text: str) -> ParsedDelta:
        self._buffer += text
        self._run(final=False)
        return self._take()

    def finish(self) -> ParsedDelta:
        self._run(final=True)
        if self._body is _Body.NONE and not self._seen_marker and self._header:
            # The model never used the format: its text is the answer. (A header cut off by
            # the end of generation is markup and is dropped.)
            self._write_content(self._header, raw=True)
        self._end_message()
        return self._take()

    def _take(self) -> ParsedDelta:
        delta = self._sink.take()
        delta.reasoning, self._reasoning_out = self._reasoning_out, ""
        return delta

    def _run(self, *, final: bool) -> None:
        while True:
            found = find_marker(self._buffer, MARKERS)
            if found is None:
                keep = 0 if final else partial_marker_length(self._buffer, MARKERS)
                self._text(self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                return
            position, marker = found
            self._text(self._buffer[:position])
            self._buffer = self._buffer[position + len(marker) :]
            self._marker(marker)

    def _marker(self, marker: str) -> None:
        self._seen_marker = True
        if marker in (START, CHANNEL):
            if self._body is not _Body.NONE:
                self._end_message()  # a message the model did not end
            if marker == START:
                self._header = ""
                self._channel = ""
            self._header += " "
            self._in_channel = marker == CHANNEL
        elif marker == CONSTRAIN:
            self._header += " "
            self._in_channel = False
        elif marker == MESSAGE:
            if self._body is _Body.NONE:
                self._open_message()
        elif marker in MESSAGE_ENDS:
            self._end_message()
        # other special tokens (end of text) are dropped

    def _text(self, text: str) -> None:
        if not text:
            return
        body = self._body
        if body is _Body.NONE:
            self._header += text
            if self._in_channel:
                self._channel += text
            if len(self._header) > _MAX_HEADER:
                header, self._header, self._channel = self._header, "", ""
                self._body = _Body.CONTENT
                self._message_started = False
                self._write_content(header, raw=True)
        elif body is _Body.CONTENT:
            self._write_content(text)
        elif body is _Body.REASONING:
            self._write_reasoning(text)
        elif body is _Body.CALL:
            self._write_arguments(text)

    def _open_message(self) -> None:
        recipient = _RECIPIENT.search(self._header)
        channel = self._channel.strip().split(" ")[0] if self._channel.strip() else ""
        self._message_started = False
        if recipient is not None and self._tools:
            self._body = _Body.CALL
            self._arguments = ArgumentStream()
            self._arguments.attach(self._sink.begin(recipient.group(1)), self._sink)
        elif channel == "analysis":
            self._body = _Body.REASONING if self._reasoning else _Body.DROPPED
        else:
            self._body = _Body.CONTENT
        self._header = ""
        self._channel = ""
        self._in_channel = False

    def _end_message(self) -> None:
        if self._body is _Body.CALL and self._arguments is not None:
            self._arguments.close(self._sink)
            self._arguments = None
        self._body = _Body.NONE
        self._header = ""
        self._channel = ""
        self._in_channel = False

    def _write_content(self, text: str, *, raw: bool = False) -> None:
        if not self._message_started and not raw:
            text = text.lstrip(_WHITESPACE)
            if not text:
                return
        if not self._message_started:
            self._message_started = True
            if self._wrote_content:
                text = " " + text
        self._wrote_content = True
        self._sink.content(text)

    def _write_reasoning(self, text: str) -> None:
        if not self._message_started:
            text = text.lstrip(_WHITESPACE)
            if not text:
                return
            self._message_started = True
            if self._wrote_reasoning:
                text = " " + text
        self._wrote_reasoning = True
        self._reasoning_out += text

    def _write_arguments(self, text: str) -> None:
        assert self._arguments is not None
        for position, char in enumerate(text):
            if self._arguments.finished():
                rest = text[position:]
                if rest.strip(_WHITESPACE):
                    self._junk(rest)
                return
            status = self._arguments.feed(char, self._sink)
            if status is not True:
                self._junk(text[position:])
                return

    def _junk(self, text: str) -> None:
        """Text in a call body that is not JSON: closes the arguments, goes to content."""
        assert self._arguments is not None
        self._arguments.close(self._sink)
        self._arguments = None
        self._body = _Body.CONTENT
        self._message_started = False
        self._write_content(text)
