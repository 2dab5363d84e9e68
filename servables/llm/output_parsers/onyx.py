"""Onyx's output: turns addressed to a recipient, and ATEM tool calls (OVMS's `onyx` parsers).

The model writes turns, each `[<|start|>assistant] to=<recipient><|message|>body` ended by
`<|eom|>` (more turns follow) or `<|eot|>` (the last one). A turn to `self` is reasoning; any
other turn's body (`to=user`, `to=functions...`) is content, where tool calls are written as

    <atem:function_calls><atem:invoke name="f"><atem:parameter name="p">v</atem:parameter>
    </atem:invoke></atem:function_calls>

`OnyxTurnStage` takes the turn framing apart (reasoning and content, as ThinkStage does for
`<think>`); `OnyxCallsReader` reads a calls block, each value as JSON where it parses and the
tool's schema does not say string, else as text (OVMS's rules).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from servables.llm.output_parsers._markers import find_marker, partial_marker_length
from servables.llm.output_parsers._stage import ClosedBlockReader

__all__ = ["CALLS_CLOSE", "ONYX_SPECIAL", "OnyxCallsReader", "OnyxTurnStage"]

MESSAGE = "<|message|>"
CONTINUES, ENDS = "<|eom|>", "<|eot|>"
TURN_START = "<|start|>assistant"
ONYX_SPECIAL = (CONTINUES, ENDS, TURN_START)
ENVELOPE_LIMIT = 128  # an envelope (" to=recipient<|message|>") is never longer
CALLS_CLOSE = "</atem:function_calls>"
_INVOKE = re.compile(r'<atem:invoke name="([^"]*)">(.*?)</atem:invoke>', re.DOTALL)
_PARAMETER = re.compile(r'<atem:parameter name="([^"]*)">(.*?)</atem:parameter>', re.DOTALL)


class OnyxTurnStage:
    """Splits text into (reasoning, content) by turn recipient; one per generated sequence."""

    def __init__(self) -> None:
        self._buffer = ""
        self._in_body = False
        self._to_self = False

    def feed(self, text: str) -> tuple[str, str]:
        self._buffer += text
        return self._run(final=False)

    def finish(self) -> tuple[str, str]:
        return self._run(final=True)

    def _run(self, *, final: bool) -> tuple[str, str]:
        reasoning = content = ""
        while self._buffer:
            if not self._in_body and not self._envelope(final):
                break
            found = find_marker(self._buffer, ONYX_SPECIAL)
            if found is None:
                keep = 0 if final else partial_marker_length(self._buffer, ONYX_SPECIAL)
                cut = len(self._buffer) - keep
                reasoning, content = self._add(reasoning, content, self._buffer[:cut])
                self._buffer = self._buffer[cut:]
                break
            position, marker = found
            reasoning, content = self._add(reasoning, content, self._buffer[:position])
            self._buffer = self._buffer[position + len(marker) :]
            self._in_body = False  # a turn ended, or the next one starts: its envelope follows
        return reasoning, content

    def _envelope(self, final: bool) -> bool:
        """Read a turn's envelope; False while it is still being written."""
        stripped = self._buffer.lstrip()
        if stripped.startswith(TURN_START):
            self._buffer = stripped = stripped[len(TURN_START) :].lstrip()
        if not final and ("to=".startswith(stripped) or TURN_START.startswith(stripped)):
            return False  # nothing yet, or the start of an envelope
        end = stripped.find(MESSAGE, 0, ENVELOPE_LIMIT)
        if stripped.startswith("to=") and end >= 0:
            self._to_self = stripped[:end].strip() == "to=self"
            self._buffer = stripped[end + len(MESSAGE) :]
        elif stripped.startswith("to=") and not final and len(stripped) < ENVELOPE_LIMIT:
            return False
        else:
            self._to_self = False  # text outside any envelope is content
        self._in_body = True
        return True

    def _add(self, reasoning: str, content: str, piece: str) -> tuple[str, str]:
        if self._to_self:
            return reasoning + piece, content
        return reasoning, content + piece


def _typed(value: str, schema: Mapping[str, Any] | None) -> Any:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    text = value.strip("\n")
    if kind == "string":
        return text
    if kind == "boolean" and text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    try:
        return json.loads(text)
    except ValueError:
        return text


class OnyxCallsReader(ClosedBlockReader):
    """Keeps an `<atem:function_calls>` block to its end, then reports its invokes."""

    close_tag = CALLS_CLOSE

    def __init__(self, marker: str, schemas: Mapping[str, Mapping[str, Any]]) -> None:
        super().__init__(marker)
        self._schemas = schemas

    def calls(self, block: str) -> list[tuple[str, dict[str, Any]]]:
        invokes = _INVOKE.findall(block)
        if not invokes:
            raise ValueError("no invoke")
        found = []
        for name, body in invokes:
            properties = (self._schemas.get(name) or {}).get("properties") or {}
            parameters = _PARAMETER.findall(body)
            found.append(
                (name, {key: _typed(value, properties.get(key)) for key, value in parameters})
            )
        return found
