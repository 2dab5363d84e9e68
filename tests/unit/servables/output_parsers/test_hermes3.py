"""hermes3: `<tool_call>{json}</tool_call>` as Qwen2.5 / Qwen3 / Hermes 2 Pro / Hermes 3 write it.

Samples are the models' own output shapes (Qwen2.5's name-first objects one per line, Hermes'
arguments-first objects from its system prompt `{"arguments": <args-dict>, "name": ...}`).
Every sample is also streamed at every split (output_parsers.testing.check_splits).
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = ("<tool_call>", "</tool_call>")

QWEN_SINGLE = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n'
    "</tool_call>"
)
QWEN_PARALLEL = (
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}\n</tool_call>'
)
HERMES_ARGUMENTS_FIRST = (
    '<tool_call>\n{"arguments": {"query": "OpenVINO", "limit": 5}, "name": "search"}\n</tool_call>'
)

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "single call": (QWEN_SINGLE, None, [("get_weather", {"city": "Paris", "unit": "celsius"})]),
    "parallel calls": (
        QWEN_PARALLEL,
        None,
        [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome", "days": 2})],
    ),
    "arguments before name": (
        HERMES_ARGUMENTS_FIRST,
        None,
        [("search", {"query": "OpenVINO", "limit": 5})],
    ),
    "text before the call": (
        "I'll look that up for you.\n\n" + QWEN_SINGLE,
        "I'll look that up for you.",
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
    "no call": ("The capital of France is Paris.", "The capital of France is Paris.", []),
    "marker-like text, escaped quotes and nesting inside arguments": (
        '<tool_call>\n{"name": "search", "arguments": {"query": "say \\"</tool_call>\\" or '
        '<tool_call> {\\"x\\": 1}", "filters": {"a": {"b": [1, {"c": "}]"}]}}}}\n</tool_call>',
        None,
        [
            (
                "search",
                {
                    "query": 'say "</tool_call>" or <tool_call> {"x": 1}',
                    "filters": {"a": {"b": [1, {"c": "}]"}]}},
                },
            )
        ],
    ),
    "unicode, raw and escaped": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich 北京 🐉 '
        '\\u00e9\\ud83d\\ude00"}}\n</tool_call>',
        None,
        [("get_weather", {"city": "Zürich 北京 🐉 é😀"})],
    ),
    "no arguments": ('<tool_call>\n{"name": "get_time"}\n</tool_call>', None, [("get_time", {})]),
    "arguments encoded as a JSON string": (
        '<tool_call>\n{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}\n'
        "</tool_call>",
        None,
        [("get_weather", {"city": "Oslo"})],
    ),
    "literal newline inside a string is escaped": (
        '<tool_call>\n{"name": "search", "arguments": {"query": "line one\nline two"}}\n'
        "</tool_call>",
        None,
        [("search", {"query": "line one\nline two"})],
    ),
    "all JSON value types": (
        '<tool_call>{"name":"search","arguments":{"query":"x","limit":-1.5e3,"exact":false,'
        '"tags":[],"filters":{"none":null,"yes":true,"zero":0}}}</tool_call>',
        None,
        [
            (
                "search",
                {
                    "query": "x",
                    "limit": -1500.0,
                    "exact": False,
                    "tags": [],
                    "filters": {"none": None, "yes": True, "zero": 0},
                },
            )
        ],
    ),
    "text after the calls": (
        QWEN_SINGLE + "\nLet me know if you need more.",
        "Let me know if you need more.",
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    output = check_splits(parser_factory("hermes3", tools=weather_tools), text, markup=MARKUP)
    assert output.content == content
    assert output.reasoning is None
    assert calls_of(output) == calls


def test_a_call_cut_off_by_the_length_limit_is_completed(
    weather_tools: list[dict[str, Any]],
) -> None:
    text = '<tool_call>\n{"name": "search", "arguments": {"query": "weather in Par'
    output = check_splits(parser_factory("hermes3", tools=weather_tools), text, markup=MARKUP)
    assert output.content is None
    assert calls_of(output) == [("search", {"query": "weather in Par"})]


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>\n{"na',  # cut before the name is known: nothing was reported yet
        '<tool_call>\n{"tool": "get_weather", "params": {}}\n</tool_call>',  # not a call
        "<tool_call>\nI cannot call tools.",
    ],
)
def test_a_body_that_is_not_a_call_stays_content(
    text: str, weather_tools: list[dict[str, Any]]
) -> None:
    output = check_splits(parser_factory("hermes3", tools=weather_tools), text)
    assert output.tool_calls == []
    assert output.content is not None
    assert output.content.startswith("<tool_call>\n")
    # Nothing the model wrote is lost (only the closing marker, which is markup).
    assert output.content.replace(" ", "") in text.replace("</tool_call>", "").replace(" ", "")


def test_broken_arguments_close_the_call_and_the_rest_is_content(
    weather_tools: list[dict[str, Any]],
) -> None:
    text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}}\n</tool_call>'
    output = check_splits(parser_factory("hermes3", tools=weather_tools), text, markup=MARKUP)
    assert calls_of(output) == [("get_weather", {"city": None})]
    assert output.content == "Paris}}"


def test_text_that_starts_like_a_marker_is_held_only_until_it_cannot_be_one(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = parser_factory("hermes3", tools=weather_tools)()
    assert parser.feed("Use <tool").content == "Use"
    assert parser.feed("_ca").content == ""
    assert parser.feed("p> here").content == " <tool_cap> here"
    assert parser.finish().content == ""


def test_the_first_delta_names_the_call_and_arguments_stream_as_they_come(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = parser_factory("hermes3", tools=weather_tools)()
    assert not parser.feed('<tool_call>\n{"name": "get_weather", "argu')
    first = parser.feed('ments": {"ci')
    assert [(d.index, d.name, d.arguments) for d in first.tool_calls] == [(0, "get_weather", "{")]
    assert first.tool_calls[0].id is not None
    second = parser.feed('ty": "Pa')
    assert [(d.index, d.id, d.name, d.arguments) for d in second.tool_calls] == [
        (0, None, None, '"city": "Pa')
    ]
    rest = parser.feed('ris"}}\n</tool_call>')
    assert "".join(d.arguments for d in rest.tool_calls) == 'ris"}'
    assert not parser.finish()


def test_unary_ids_are_fresh_openai_style_ids(weather_tools: list[dict[str, Any]]) -> None:
    first = parser_factory("hermes3", tools=weather_tools)().parse(QWEN_PARALLEL)
    second = parser_factory("hermes3", tools=weather_tools)().parse(QWEN_PARALLEL)
    ids = [call.id for call in first.tool_calls + second.tool_calls]
    assert len(set(ids)) == 4
    assert all(call_id.startswith("call_") for call_id in ids)


def test_without_tools_there_is_nothing_to_parse() -> None:
    assert make_output_parser("hermes3", None, tools=None) is None
    assert make_output_parser("hermes3", None, tools=[]) is None
    assert make_output_parser(None, None, tools=None) is None
