"""Tool definitions, `tool_choice`, and the calls a forced choice makes the engine write.

`tools` are validated as OVMS does (same messages) and normalized to the Chat Completions form
`{"type": "function", "function": {"name", "description", "parameters"}}`; the Responses API's
flat form `{"type": "function", "name", "parameters"}` is accepted too.

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
from dataclasses import dataclass
from typing import Any, Literal

from servables.errors import InvalidRequest
from servables.llm.output_parsers import OutputParser, ParsedDelta, ToolCallDelta
from servables.llm.output_parsers.schema_refs import embed_schema
from servables.llm.output_parsers.types import new_call_id
from servables.openai.structured_output import OutputConstraint, json_schema_constraint

__all__ = [
    "ForcedCallParser",
    "ToolChoice",
    "forced_call_constraint",
    "parse_tool_choice",
    "parse_tools",
    "tool_parameters",
]

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolChoice:
    mode: Literal["auto", "none", "required", "function"] = "auto"
    name: str | None = None  # for mode "function"

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "function")


def parse_tools(value: Any, param: str = "tools") -> list[dict[str, Any]]:
    """Validated tool definitions in the Chat Completions form (OVMS's checks and messages)."""
    if not isinstance(value, list):
        raise InvalidRequest("Tools are not an array", param=param)
    tools: list[dict[str, Any]] = []
    for index, tool in enumerate(value):
        where = f"{param}[{index}]"
        if not isinstance(tool, dict):
            raise InvalidRequest("Tool is not a JSON object", param=where)
        if tool.get("type", "function") != "function":
            raise InvalidRequest("Only function tools are supported", param=f"{where}.type")
        function = tool.get("function", tool)
        if not isinstance(function, dict):
            raise InvalidRequest("Function is not a JSON object", param=f"{where}.function")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidRequest(
                "Function object does not contain a valid name field", param=f"{where}.function"
            )
        parameters = function.get("parameters")
        if parameters is not None and not isinstance(parameters, dict):
            raise InvalidRequest(
                "Function parameters are not a valid JSON object",
                param=f"{where}.function.parameters",
            )
        definition: dict[str, Any] = {"name": name}
        description = function.get("description")
        if isinstance(description, str):
            definition["description"] = description
        definition["parameters"] = parameters if parameters is not None else EMPTY_PARAMETERS
        if function.get("strict") is not None:
            definition["strict"] = function["strict"]
        tools.append({"type": "function", "function": definition})
    names = [tool["function"]["name"] for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise InvalidRequest(f"Tool names must be unique; repeated: {duplicates}", param=param)
    return tools


def parse_tool_choice(value: Any, tools: Sequence[Mapping[str, Any]] | None) -> ToolChoice:
    """OVMS's rules and messages; a named function must be one of `tools`."""
    param = "tool_choice"
    if value is None:
        return ToolChoice("auto")
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise InvalidRequest(
                "tool_choice should be either 'none' or 'auto' or 'required'", param=param
            )
        if value == "required" and not tools:
            raise InvalidRequest("tool_choice 'required' needs tools", param=param)
        return ToolChoice(value)  # type: ignore[arg-type]
    if not isinstance(value, dict):
        raise InvalidRequest("tool_choice is not a valid JSON object or string", param=param)
    kind = value.get("type")
    if kind in ("auto", "none", "required") and len(value) == 1:  # Responses API allows these
        return parse_tool_choice(kind, tools)
    if kind != "function":
        raise InvalidRequest("tool_choice.type must be 'function'", param="tool_choice.type")
    function = value.get("function", value)  # the Responses API names it at the top level
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise InvalidRequest(
            "tool_choice.function.name is not a valid string", param="tool_choice.function.name"
        )
    if name not in {tool["function"]["name"] for tool in tools or ()}:
        raise InvalidRequest(
            f"tool_choice names the function {name!r}, which is not in tools",
            param="tool_choice.function.name",
        )
    return ToolChoice("function", name)


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
