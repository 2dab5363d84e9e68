"""The calls a forced `tool_choice` makes the engine write, and reading them back.

`tool_choice` "required" and a named function are enforced by the engine, independently of the
model's own tool-call format (vLLM's design): a named choice constrains the output to the
function's parameters schema, so the output is the call's arguments; "required" constrains it to
a JSON array of `{"name": <one of the tools>, "arguments": <that tool's schema>}` with at least
one item (exactly one when `parallel_tool_calls` is false). `ForcedCallParser` turns that output
into tool calls. So even a model that has never seen a tool returns a call whose arguments
validate against the schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from servables.llm.output_parsers import OutputParser, ParsedDelta, ToolCallDelta
from servables.llm.output_parsers.schema_refs import embed_schema
from servables.llm.output_parsers.types import new_call_id
from servables.llm.request import OutputConstraint, ToolChoice, json_schema_constraint


def tool_parameters(tools: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    for tool in tools:
        if tool["function"]["name"] == name:
            parameters: dict[str, Any] = tool["function"]["parameters"]
            return parameters
    raise KeyError(name)


def forced_call_constraint(
    tools: Sequence[Mapping[str, Any]], choice: ToolChoice, parallel_tool_calls: bool
) -> OutputConstraint:
    """The grammar for a "required" or named choice; see the module docstring."""
    if choice.mode == "function":
        assert choice.name is not None
        index = next(i for i, t in enumerate(tools) if t["function"]["name"] == choice.name)
        return json_schema_constraint(
            tool_parameters(tools, choice.name), f"tools[{index}].function.parameters"
        )
    alternatives = []
    definitions: dict[str, Any] = {}
    for index, tool in enumerate(tools):
        function = tool["function"]
        # Its local references must still resolve inside the combined schema.
        arguments = embed_schema(function["parameters"], f"tool_{index}_parameters", definitions)
        alternatives.append(
            {
                "type": "object",
                "properties": {"name": {"const": function["name"]}, "arguments": arguments},
                "required": ["name", "arguments"],
            }
        )
    schema: dict[str, Any] = {"type": "array", "items": {"anyOf": alternatives}, "minItems": 1}
    if definitions:
        schema["$defs"] = definitions
    if not parallel_tool_calls:
        schema["maxItems"] = 1
    return json_schema_constraint(schema, "tools")


class ForcedCallParser(OutputParser):
    """Reads the output a forced `tool_choice` grammar produced (see the module docstring).

    A named choice streams: the call's id and name with the first text, then each piece of text
    as an arguments fragment. "required" waits for the whole array, then gives every call. If
    generation was cut short (max_tokens) and the array does not parse, its text is content.
    """

    def __init__(self, name: str | None) -> None:
        self.name = name
        self._started = False
        self._text: list[str] = []

    def feed(self, text: str) -> ParsedDelta:
        if not text:
            return ParsedDelta()
        if self.name is None:
            self._text.append(text)
            return ParsedDelta()
        if not self._started:
            self._started = True
            return ParsedDelta(tool_calls=[ToolCallDelta(0, new_call_id(), self.name, text)])
        return ParsedDelta(tool_calls=[ToolCallDelta(0, arguments=text)])

    def finish(self) -> ParsedDelta:
        if self.name is not None:
            if not self._started:  # no output at all: still a call, with no arguments
                self._started = True
                return ParsedDelta(tool_calls=[ToolCallDelta(0, new_call_id(), self.name, "{}")])
            return ParsedDelta()
        text = "".join(self._text)
        try:
            items = json.loads(text)
        except ValueError:
            return ParsedDelta(content=text)
        if not isinstance(items, list):
            return ParsedDelta(content=text)
        calls: list[ToolCallDelta] = []
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                return ParsedDelta(content=text)
            arguments = item.get("arguments", {})
            calls.append(
                ToolCallDelta(
                    len(calls),
                    new_call_id(),
                    item["name"],
                    json.dumps(arguments, ensure_ascii=False),
                )
            )
        return ParsedDelta(tool_calls=calls)
