"""XML tool calls with one tag per parameter: Qwen3-Coder's (OVMS's `qwen3coder`) and MiniCPM5's
(OVMS's `minicpm5`), which differ only in how the tags are spelled (`XmlSyntax`).

    <tool_call>                      <function name="get_weather">
    <function=get_weather>           <param name="city">Paris</param>
    <parameter=city>                 <param name="note"><![CDATA[a < b]]></param>
    Paris                            </function>
    </parameter>
    </function>
    </tool_call>

Parameter values are bare text, so their JSON type comes from the tool's schema, as OVMS and
vLLM do: a string parameter keeps the text; other types are read as JSON (Python literals and
True/False are accepted too) and fall back to the text when they do not parse. MiniCPM5's
template wraps a value holding `<`, `&` or a newline in CDATA, which is unwrapped (its text may
hold the closing tags). The call's first delta goes out when the function's name is complete
and each parameter when it closes, so the arguments stream member by member.
"""

from __future__ import annotations

import ast
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servables.io.request_fields import is_integer, is_number
from servables.llm.output_parsers._json import loads_or_none
from servables.llm.output_parsers._markers import find_marker
from servables.llm.output_parsers._stage import BodyReader, CallSink

__all__ = ["MINICPM5", "QWEN3_CODER", "XmlFunctionReader", "XmlSyntax", "convert_parameter"]


@dataclass(frozen=True)
class XmlSyntax:
    """How one family spells its tags; a name ends at `name_end`."""

    function: str
    name_end: str
    parameter: str
    parameter_end: str
    function_end: str = "</function>"
    cdata: bool = False  # values may be wrapped in <![CDATA[...]]>


QWEN3_CODER = XmlSyntax("<function=", ">", "<parameter=", "</parameter>")
MINICPM5 = XmlSyntax('<function name="', '">', '<param name="', "</param>", cdata=True)
CDATA_OPEN, CDATA_CLOSE = "<![CDATA[", "]]>"
_WHITESPACE = " \t\n\r"
_MAX_NAME = 256


def _schema_types(schema: Mapping[str, Any] | None) -> set[str]:
    if not schema:
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {item for item in declared if isinstance(item, str)}
    types: set[str] = set()
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or ():
            if isinstance(option, Mapping):
                types |= _schema_types(option)
    return types


def convert_parameter(text: str, schema: Mapping[str, Any] | None) -> Any:
    """A parameter's text as the value its schema asks for (the text itself when unsure)."""
    types = _schema_types(schema)
    if types == {"string"}:
        return text
    lowered = text.strip().lower()
    if "boolean" in types and lowered in ("true", "false"):
        return lowered == "true"
    if "null" in types and lowered in ("null", "none"):
        return None
    value = loads_or_none(text)
    if value is None and text.strip() != "null":
        try:
            value = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return text
    if types and not _matches(value, types):
        return text if "string" in types or not types else value
    return value


def _matches(value: Any, types: set[str]) -> bool:
    checks = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: is_integer(v),
        "number": lambda v: is_number(v),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
        "null": lambda v: v is None,
    }
    return any(checks[name](value) for name in types if name in checks)


class _Where(enum.Enum):
    BEFORE_FUNCTION = enum.auto()  # after a wrapper (<tool_call>): expecting the function tag
    FUNCTION_NAME = enum.auto()
    IN_FUNCTION = enum.auto()  # expecting <parameter= or </function>
    PARAMETER_NAME = enum.auto()
    PARAMETER_VALUE = enum.auto()


def _trim_newline(text: str) -> str:
    """The value without the one newline each side that lays out the tags."""
    if text.startswith("\n"):
        text = text[1:]
    if text.endswith("\n"):
        text = text[:-1]
    return text


def _uncdata(text: str) -> str:
    stripped = text.strip(_WHITESPACE)
    if stripped.startswith(CDATA_OPEN) and stripped.endswith(CDATA_CLOSE):
        return stripped[len(CDATA_OPEN) : -len(CDATA_CLOSE)]
    return text


class XmlFunctionReader(BodyReader):
    """One function call; the marker was a wrapper (`<tool_call>`) or the function tag."""

    def __init__(
        self,
        marker: str,
        schemas: Mapping[str, Mapping[str, Any]],
        syntax: XmlSyntax = QWEN3_CODER,
    ) -> None:
        self._marker = marker
        self._schemas = schemas
        self._syntax = syntax
        opened = marker == syntax.function
        self._where = _Where.FUNCTION_NAME if opened else _Where.BEFORE_FUNCTION
        self._text = ""  # not yet consumed text of the current part
        self._raw: list[str] = []
        self._index: int | None = None
        self._function = ""
        self._parameter = ""
        self._members: set[str] = set()

    def feed(self, text: str, sink: CallSink) -> str:
        self._text += text
        while not self.done and self._step(sink, final=False):
            pass
        if not self.done:
            return ""
        rest, self._text = self._text, ""
        return rest

    def finish(self, sink: CallSink) -> None:
        while not self.done and self._step(sink, final=True):
            pass
        if self.done:
            return
        if self._index is None:
            self.rejected_text = self._marker + "".join(self._raw) + self._text
            self.done = True
        else:
            if self._where is _Where.PARAMETER_VALUE:
                self._add_parameter(sink, self._consume(len(self._text)))
            self._close(sink)
        self._text = ""

    def _consume(self, count: int) -> str:
        taken, self._text = self._text[:count], self._text[count:]
        self._raw.append(taken)
        return taken

    def _step(self, sink: CallSink, *, final: bool) -> bool:
        where, syntax = self._where, self._syntax
        if where in (_Where.BEFORE_FUNCTION, _Where.IN_FUNCTION):
            stripped = self._text.lstrip(_WHITESPACE)
            expected = (
                (syntax.function,)
                if where is _Where.BEFORE_FUNCTION
                else (syntax.parameter, syntax.function_end)
            )
            for tag in expected:
                if stripped.startswith(tag):
                    self._consume(len(self._text) - len(stripped) + len(tag))
                    if tag == syntax.function:
                        self._where = _Where.FUNCTION_NAME
                    elif tag == syntax.parameter:
                        self._where = _Where.PARAMETER_NAME
                    else:
                        self._close(sink)
                    return True
            if not final and any(tag.startswith(stripped) for tag in expected):
                return False
            self._stop(sink)
            return False
        if where in (_Where.FUNCTION_NAME, _Where.PARAMETER_NAME):
            end = self._text.find(syntax.name_end)
            if end < 0:
                if len(self._text) > _MAX_NAME or "<" in self._text or "\n" in self._text:
                    self._stop(sink)
                return False
            name = self._text[:end].strip()
            if not name or "<" in name or "\n" in name:
                self._stop(sink)
                return False
            self._consume(end + len(syntax.name_end))
            if where is _Where.FUNCTION_NAME:
                self._function = name
                self._index = sink.begin(name)
                self._where = _Where.IN_FUNCTION
            else:
                self._parameter = name
                self._where = _Where.PARAMETER_VALUE
            return True
        # PARAMETER_VALUE: up to its closing tag; a missing one is tolerated before the next tag.
        found = self._value_end()
        if found is None:
            return False
        position, tag = found
        value = self._consume(position)
        self._add_parameter(sink, value)
        if tag == syntax.parameter_end:
            self._consume(len(tag))
        self._where = _Where.IN_FUNCTION
        return True

    def _value_end(self) -> tuple[int, str] | None:
        """Where the parameter's value ends and the tag there; None while it goes on."""
        syntax = self._syntax
        start = 0
        if syntax.cdata and self._text.lstrip(_WHITESPACE).startswith(CDATA_OPEN):
            close = self._text.find(CDATA_CLOSE)  # the tags inside CDATA are its text
            if close < 0:
                return None
            start = close + len(CDATA_CLOSE)
        ends = (syntax.parameter_end, syntax.parameter, syntax.function_end)
        return find_marker(self._text, ends, start)

    def _stop(self, sink: CallSink) -> None:
        """The text is not (or no longer) a function call: end here, the rest goes back."""
        if self._index is None:
            self.rejected_text = self._marker + "".join(self._raw)
            self.done = True
        else:
            self._close(sink)

    def _add_parameter(self, sink: CallSink, raw_value: str) -> None:
        assert self._index is not None
        name = self._parameter
        if name in self._members:
            return
        schema = self._schemas.get(self._function, {}).get("properties", {}).get(name)
        text = _trim_newline(raw_value)
        value = convert_parameter(_uncdata(text) if self._syntax.cdata else text, schema)
        member = json.dumps(name, ensure_ascii=False) + ": " + json.dumps(value, ensure_ascii=False)
        sink.arguments(self._index, ("{" if not self._members else ", ") + member)
        self._members.add(name)

    def _close(self, sink: CallSink) -> None:
        assert self._index is not None
        sink.arguments(self._index, "}" if self._members else "{}")
        self.done = True
