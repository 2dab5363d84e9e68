"""llama3: Llama 3.1's JSON calls (bare or after `<|python_tag|>`, several joined by ';') and
Llama 3.2 / 3.3 / 4's pythonic lists, fed with special tokens kept (the tag is one).

Samples are the shapes Meta's templates teach and vLLM's tests use, ending with the
end-of-turn / end-of-message token the model writes.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = ("<|python_tag|>", "<|eot_id|>", "<|eom_id|>", "<|eot|>")

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "json call (Llama 3.1)": (
        '{"name": "get_weather", "parameters": {"city": "San Francisco", "unit": "celsius"}}'
        "<|eot_id|>",
        None,
        [("get_weather", {"city": "San Francisco", "unit": "celsius"})],
    ),
    "python tag and two calls joined by semicolons": (
        '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "search", "parameters": {"query": "Paris; France", "limit": 3}}<|eom_id|>',
        None,
        [
            ("get_weather", {"city": "Paris"}),
            ("search", {"query": "Paris; France", "limit": 3}),
        ],
    ),
    "text before the python tag": (
        'Let me check. <|python_tag|>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
        "<|eom_id|>",
        "Let me check.",
        [("get_weather", {"city": "Oslo"})],
    ),
    "pythonic list (Llama 3.2)": (
        "[get_weather(city='San Francisco', unit='celsius'), search(query=\"a, b\", "
        "filters={'year': 2024, 'ok': True}, tags=['x', \"y\"], limit=2.5)]<|eot_id|>",
        None,
        [
            ("get_weather", {"city": "San Francisco", "unit": "celsius"}),
            (
                "search",
                {
                    "query": "a, b",
                    "filters": {"year": 2024, "ok": True},
                    "tags": ["x", "y"],
                    "limit": 2.5,
                },
            ),
        ],
    ),
    "pythonic call without arguments (Llama 4)": ("[get_time()]<|eot|>", None, [("get_time", {})]),
    "pythonic after the python tag": (
        '<|python_tag|>[get_weather(city="Zürich")]<|eom_id|>',
        None,
        [("get_weather", {"city": "Zürich"})],
    ),
    "guided call after text": (
        'Sure! {"name": "get_weather", "parameters": {"city": "Rome"}}<|eot_id|>',
        "Sure!",
        [("get_weather", {"city": "Rome"})],
    ),
    "plain answer": (
        "The weather in Paris is sunny.<|eot_id|>",
        "The weather in Paris is sunny.",
        [],
    ),
    "a JSON answer is not a call": (
        '{"name": "Ada", "born": 1815}<|eot_id|>',
        '{"name": "Ada", "born": 1815}',
        [],
    ),
    "a bracketed answer is not a call": (
        "[1] Lovelace, A. (1843).<|eot_id|>",
        "[1] Lovelace, A. (1843).",
        [],
    ),
    "a list of calls that is not pure keyword calls stays content": (
        "[get_weather('Paris')]<|eot_id|>",
        "[get_weather('Paris')]",
        [],
    ),
    "nested and escaped JSON": (
        '{"name": "search", "parameters": {"query": "he said \\"hi\\" <|eot_id|>", '
        '"filters": {"a": [{"b": {}}]}}}<|eot_id|>',
        None,
        [("search", {"query": 'he said "hi" <|eot_id|>', "filters": {"a": [{"b": {}}]}})],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    markup = MARKUP if case != "nested and escaped JSON" else ()
    output = check_splits(parser_factory("llama3", tools=weather_tools), text, markup=markup)
    assert output.content == content
    assert calls_of(output) == calls


def test_a_json_call_cut_off_is_completed(weather_tools: list[dict[str, Any]]) -> None:
    text = '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Ber'
    output = check_splits(parser_factory("llama3", tools=weather_tools), text, markup=MARKUP)
    assert calls_of(output) == [("get_weather", {"city": "Ber"})]


def test_a_pythonic_list_cut_off_is_given_back_as_content(
    weather_tools: list[dict[str, Any]],
) -> None:
    text = '[get_weather(city="Ber'
    output = check_splits(parser_factory("llama3", tools=weather_tools), text, markup=MARKUP)
    assert (output.content, output.tool_calls) == (text, [])


def test_a_builtin_tool_call_is_content_without_the_special_token(
    weather_tools: list[dict[str, Any]],
) -> None:
    text = '<|python_tag|>brave_search.call(query="weather")<|eom_id|>'
    output = check_splits(parser_factory("llama3", tools=weather_tools), text, markup=MARKUP)
    assert (output.content, output.tool_calls) == ('brave_search.call(query="weather")', [])


def test_pythonic_calls_are_reported_when_the_list_closes(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = parser_factory("llama3", tools=weather_tools)()
    assert not parser.feed('[get_weather(city="Paris"), get_')
    delta = parser.feed("time()]")
    assert [(d.index, d.name, d.arguments) for d in delta.tool_calls] == [
        (0, "get_weather", '{"city": "Paris"}'),
        (1, "get_time", "{}"),
    ]


def test_special_tokens_are_kept_only_when_tools_are_parsed(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = make_output_parser("llama3", None, tools=weather_tools)
    assert parser is not None and parser.keep_special_tokens
    assert make_output_parser("llama3", None, tools=None) is None
