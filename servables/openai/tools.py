"""Tool definitions and `tool_choice`, read from a request into the engine's terms.

`tools` are validated as OVMS does (same messages) and normalized to the Chat Completions form
`{"type": "function", "function": {"name", "description", "parameters"}}`; the Responses API's
flat form `{"type": "function", "name", "parameters"}` is accepted too. A forced `tool_choice`
becomes an output constraint the engine enforces (servables/llm/forced_calls.py says how).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servables.errors import InvalidRequest
from servables.llm.request import ToolChoice

__all__ = ["parse_tool_choice", "parse_tools"]

EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


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
