"""qwen3coder: Qwen3-Coder / Qwen3.6's XML calls, parameter values typed by the tools' schemas."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory
from servables.llm.output_parsers.xml_calls import convert_parameter

MARKUP = ("<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=")

ONE_CALL = (
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>"
)

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "one call, values typed by the schema": (
        ONE_CALL,
        None,
        [("get_weather", {"city": "San Francisco", "days": 3})],
    ),
    "text then two calls": (
        "I'll look both up.\n\n"
        + ONE_CALL
        + '\n<tool_call>\n<function=search>\n<parameter=query>\n1 < 2 && "quoted"\n'
        '</parameter>\n<parameter=filters>\n{"lang": "en", "n": [1, 2]}\n</parameter>\n'
        "<parameter=exact>\nTrue\n</parameter>\n<parameter=limit>\n2.5\n</parameter>\n"
        "<parameter=tags>\n['a', 'b']\n</parameter>\n</function>\n</tool_call>",
        "I'll look both up.",
        [
            ("get_weather", {"city": "San Francisco", "days": 3}),
            (
                "search",
                {
                    "query": '1 < 2 && "quoted"',
                    "filters": {"lang": "en", "n": [1, 2]},
                    "exact": True,
                    "limit": 2.5,
                    "tags": ["a", "b"],
                },
            ),
        ],
    ),
    "a string parameter that looks like a number stays a string": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\n2024\n</parameter>\n</function>"
        "\n</tool_call>",
        None,
        [("get_weather", {"city": "2024"})],
    ),
    "multi-line value and unknown tool": (
        "<tool_call>\n<function=write_file>\n<parameter=content>\ndef f():\n    return 1\n"
        "</parameter>\n<parameter=mode>\n420\n</parameter>\n</function>\n</tool_call>",
        None,
        [("write_file", {"content": "def f():\n    return 1", "mode": 420})],
    ),
    "no parameters": (
        "<tool_call>\n<function=get_time>\n</function>\n</tool_call>",
        None,
        [("get_time", {})],
    ),
    "missing </parameter>": (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n<parameter=days>\n2\n"
        "</function>\n</tool_call>",
        None,
        [("get_weather", {"city": "Oslo", "days": 2})],
    ),
    "plain answer": ("Use `<tool_call>` tags wisely.", None, []),
}


@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    markup = MARKUP if case != "plain answer" else ()
    output = check_splits(parser_factory("qwen3coder", tools=weather_tools), text, markup=markup)
    if case == "plain answer":
        content = text
    assert output.content == content
    assert calls_of(output) == calls


def test_a_call_cut_off_inside_a_value_keeps_what_was_written(
    weather_tools: list[dict[str, Any]],
) -> None:
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Fra"
    output = check_splits(parser_factory("qwen3coder", tools=weather_tools), text, markup=MARKUP)
    assert calls_of(output) == [("get_weather", {"city": "San Fra"})]


def test_a_call_cut_off_before_its_name_is_content(weather_tools: list[dict[str, Any]]) -> None:
    text = "Sure.\n<tool_call>\n<function=get_wea"
    output = check_splits(parser_factory("qwen3coder", tools=weather_tools), text)
    assert (output.content, output.tool_calls) == (text, [])


def test_the_name_goes_out_first_and_each_parameter_when_it_closes(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = parser_factory("qwen3coder", tools=weather_tools)()
    first = parser.feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar")
    assert [(d.name, d.arguments) for d in first.tool_calls] == [("get_weather", "")]
    second = parser.feed("is\n</parameter>\n")
    assert [d.arguments for d in second.tool_calls] == ['{"city": "Paris"']
    third = parser.feed("</function>\n</tool_call>")
    assert [d.arguments for d in third.tool_calls] == ["}"]


@pytest.mark.parametrize(
    ("text", "schema", "value"),
    [
        ("42", {"type": "integer"}, 42),
        ("4.5", {"type": "number"}, 4.5),
        ("forty", {"type": "integer"}, "forty"),
        ("true", {"type": "boolean"}, True),
        ("False", {"type": "boolean"}, False),
        ("null", {"type": ["string", "null"]}, None),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ("{'a': 1}", {"type": "object"}, {"a": 1}),
        ("42", {"type": "string"}, "42"),
        ("42", None, 42),
        ("hello", None, "hello"),
        ("7", {"anyOf": [{"type": "integer"}, {"type": "string"}]}, 7),
    ],
)
def test_parameter_values_follow_the_schema(text: str, schema: Any, value: Any) -> None:
    assert convert_parameter(text, schema) == value
