"""Tool definitions, tool_choice, and the grammar + parser of forced tool choices."""

from __future__ import annotations

import json
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from servables.errors import InvalidRequest
from servables.llm.forced_calls import ForcedCallParser, forced_call_constraint
from servables.llm.output_parsers.base import assemble
from servables.llm.request import ToolChoice
from servables.openai.tools import parse_tool_choice, parse_tools

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"$ref": "#/$defs/City"}},
            "required": ["city"],
            "$defs": {"City": {"type": "string"}},
        },
    },
}
ADD = {"type": "function", "name": "add", "parameters": {"type": "object"}}  # Responses form


def test_tools_are_normalized_to_the_chat_form() -> None:
    tools = parse_tools([WEATHER, ADD, {"type": "function", "function": {"name": "noop"}}])
    assert tools[0] == WEATHER
    assert tools[1] == {
        "type": "function",
        "function": {"name": "add", "parameters": ADD["parameters"]},
    }
    assert tools[2]["function"]["parameters"] == {"type": "object", "properties": {}}


@pytest.mark.parametrize(
    ("tools", "message", "param"),
    [
        ({"a": 1}, "Tools are not an array", "tools"),
        ([{"type": "web_search"}], "Only function tools are supported", "tools[0].type"),
        (
            [{"type": "function", "function": {"name": 3}}],
            "does not contain a valid name",
            "tools[0].function",
        ),
        (
            [{"type": "function", "function": {"name": "f", "parameters": "x"}}],
            "Function parameters are not a valid JSON object",
            "tools[0].function.parameters",
        ),
        ([WEATHER, WEATHER], "Tool names must be unique", "tools"),
    ],
)
def test_bad_tools(tools: Any, message: str, param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_tools(tools)
    assert message in info.value.message
    assert info.value.param == param


def test_tool_choice() -> None:
    tools = parse_tools([WEATHER, ADD])
    assert parse_tool_choice(None, tools) == ToolChoice("auto")
    assert parse_tool_choice("none", tools) == ToolChoice("none")
    named = {"type": "function", "function": {"name": "add"}}
    assert parse_tool_choice(named, tools) == ToolChoice("function", "add")
    assert parse_tool_choice({"type": "function", "name": "add"}, tools) == ToolChoice(
        "function", "add"
    )
    for bad, param in [
        ("always", "tool_choice"),
        (3, "tool_choice"),
        ({"type": "function", "function": {"name": "missing"}}, "tool_choice.function.name"),
        ({"type": "function", "function": {}}, "tool_choice.function.name"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            parse_tool_choice(bad, tools)
        assert info.value.param == param
    with pytest.raises(InvalidRequest):
        parse_tool_choice("required", None)


def test_required_grammar_accepts_exactly_calls_of_the_tools() -> None:
    tools = parse_tools([WEATHER, ADD])
    constraint = forced_call_constraint(tools, ToolChoice("required"), parallel_tool_calls=False)
    schema = json.loads(constraint.text)
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    assert not validator.is_valid(
        [{"name": "get_weather", "arguments": {"city": 3}}]
    )  # $ref rebased
    assert not validator.is_valid([])
    assert not validator.is_valid([{"name": "add", "arguments": {}}] * 2)  # parallel off
    named = forced_call_constraint(tools, ToolChoice("function", "get_weather"), True)
    assert json.loads(named.text) == WEATHER["function"]["parameters"]  # type: ignore[index]


def test_forced_parsers() -> None:
    named = ForcedCallParser("add")
    deltas = [named.feed('{"a": '), named.feed("1}"), named.finish()]
    (call,) = assemble(deltas).tool_calls
    assert (call.name, call.arguments) == ("add", '{"a": 1}') and call.id.startswith("call_")
    required = ForcedCallParser(None)
    text = '[{"name": "add", "arguments": {"a": 1}}, {"name": "f", "arguments": {}}]'
    parsed = assemble([required.feed(text[:9]), required.feed(text[9:]), required.finish()])
    assert [(c.name, json.loads(c.arguments)) for c in parsed.tool_calls] == [
        ("add", {"a": 1}),
        ("f", {}),
    ]
    assert parsed.content is None
    cut = ForcedCallParser(None)
    assert assemble([cut.feed('[{"name": "a'), cut.finish()]).content == '[{"name": "a'
