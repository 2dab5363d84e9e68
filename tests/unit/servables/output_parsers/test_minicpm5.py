"""minicpm5: MiniCPM5's `<function name="f"><param name="p">v</param></function>` calls, values
typed by the tools' schemas (CDATA unwrapped), and its `<think>` reasoning, whose tags are special
tokens: the text keeps special tokens and `<s>` and `<|im_end|>` are dropped, as OVMS's parsers
do. Each case must parse the same whole and streamed at every split (output_parsers.testing)."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.registry import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = ('<function name="', "</function>", '<param name="', "</param>", "<s>", "<|im_end|>")
WEATHER = '<function name="get_weather"><param name="city">Beijing</param>'

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "one call, two parameters": (
        WEATHER + '<param name="unit">celsius</param></function>',
        None,
        [("get_weather", {"city": "Beijing", "unit": "celsius"})],
    ),
    "calls one after another, values typed by the schemas": (
        WEATHER + '<param name="days">3</param></function>'
        '<function name="search"><param name="query">OpenVINO</param>'
        '<param name="limit">2.5</param><param name="exact">true</param></function>',
        None,
        [
            ("get_weather", {"city": "Beijing", "days": 3}),
            ("search", {"query": "OpenVINO", "limit": 2.5, "exact": True}),
        ],
    ),
    "text before a call, special tokens around": (
        "<s>Let me check the weather. " + WEATHER + "</function><|im_end|>",
        "Let me check the weather.",
        [("get_weather", {"city": "Beijing"})],
    ),
    "Python literals for an object and an array": (
        "<function name=\"search\"><param name=\"filters\">{'lang': 'en'}</param>"
        "<param name=\"tags\">['1', '2', '3']</param></function>",
        None,
        [("search", {"filters": {"lang": "en"}, "tags": ["1", "2", "3"]})],
    ),
    "CDATA values: markup and newlines inside are text": (
        '<function name="search"><param name="query"><![CDATA[a < b && "c"\n'
        "</param> is not the end]]></param></function>",
        None,
        [("search", {"query": 'a < b && "c"\n</param> is not the end'})],
    ),
    "newlines around a value, quotes and backslashes kept": (
        '<function name="search"><param name="query">\nsay "hi" \\ there\n</param></function>',
        None,
        [("search", {"query": 'say "hi" \\ there'})],
    ),
    "an empty value and a call without parameters": (
        '<function name="get_weather"><param name="city"></param></function>'
        '<function name="pwd"></function>',
        None,
        [("get_weather", {"city": ""}), ("pwd", {})],
    ),
    "angle brackets in plain text are no call": (
        "The value of a < b is true, and 3 < 4 as well.",
        "The value of a < b is true, and 3 < 4 as well.",
        [],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    output = check_splits(parser_factory("minicpm5", tools=weather_tools), text, markup=MARKUP)
    assert output.content == content
    assert calls_of(output) == calls


def test_reasoning_then_a_call(weather_tools: list[dict[str, Any]]) -> None:
    text = "<think>I should call the tool.</think>" + WEATHER + "</function><|im_end|>"
    output = check_splits(
        parser_factory("minicpm5", "minicpm5", tools=weather_tools), text, markup=MARKUP
    )
    assert output.reasoning == "I should call the tool."
    assert calls_of(output) == [("get_weather", {"city": "Beijing"})]
    assert output.content is None


def test_a_prompt_that_opened_the_thinking_block() -> None:
    """enable_thinking ends MiniCPM5's generation prompt with `<think>\\n`."""
    output = check_splits(
        parser_factory(None, "minicpm5", tools=None, starts_in_reasoning=True),
        "Paris is the capital.</think>\n\nParis.<|im_end|>",
    )
    assert (output.reasoning, output.content) == ("Paris is the capital.", "Paris.")


def test_both_keep_special_tokens_for_the_think_tags(weather_tools: list[dict[str, Any]]) -> None:
    for tools in (weather_tools, None):
        parser = make_output_parser("minicpm5", "minicpm5", tools=tools)
        assert parser is not None and parser.keep_special_tokens


def test_a_call_cut_off_by_the_length_limit_keeps_its_parameters(
    weather_tools: list[dict[str, Any]],
) -> None:
    cut = '<function name="get_weather"><param name="city">Ber'
    output = check_splits(parser_factory("minicpm5", tools=weather_tools), cut)
    assert calls_of(output) == [("get_weather", {"city": "Ber"})]
