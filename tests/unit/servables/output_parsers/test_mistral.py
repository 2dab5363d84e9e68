"""mistral and devstral: `[TOOL_CALLS]` followed by a JSON list of calls (Mistral 7B v0.3,
Nemo, Large) or by `name[ARGS]{...}` (Devstral, Mistral Small 3.2, Magistral); both names read
both forms. `[TOOL_CALLS]` and `</s>` are special tokens, so the text keeps them.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = ("[TOOL_CALLS]", "[ARGS]", "</s>")

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "list form, one call (v0.3)": (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris", "unit": '
        '"celsius"}}]</s>',
        None,
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
    "list form, parallel calls": (
        '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": '
        '"search", "arguments": {"query": "[TOOL_CALLS] in a string", "tags": ["a"]}}]</s>',
        None,
        [
            ("get_weather", {"city": "Paris"}),
            ("search", {"query": "[TOOL_CALLS] in a string", "tags": ["a"]}),
        ],
    ),
    "list form without the tag (skipped special token)": (
        '[{"name": "get_weather", "arguments": {"city": "Nice"}}]',
        None,
        [("get_weather", {"city": "Nice"})],
    ),
    "named form (Devstral)": (
        '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}</s>',
        None,
        [("get_weather", {"city": "Paris"})],
    ),
    "named form, two calls and text before": (
        'Let me check both.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]search'
        '[ARGS]{"query": "métro \\"RER\\"", "filters": {"line": ["A", "B"]}}</s>',
        "Let me check both.",
        [
            ("get_weather", {"city": "Paris"}),
            ("search", {"query": 'métro "RER"', "filters": {"line": ["A", "B"]}}),
        ],
    ),
    "plain answer": ("Paris is sunny today.</s>", "Paris is sunny today.", []),
    "a JSON list answer is not a call": (
        '[{"name": "Ada"}, {"name": "Grace"}]</s>',
        '[{"name": "Ada"}, {"name": "Grace"}]',
        [],
    ),
}


@pytest.mark.parametrize("family", ["mistral", "devstral"])
@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    family: str, case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    if family == "devstral" and case.startswith("list form without"):
        calls, content = [], text  # the tagless list is mistral's only
    markup = MARKUP if "in a string" not in text else ("[ARGS]", "</s>")
    output = check_splits(parser_factory(family, tools=weather_tools), text, markup=markup)
    assert output.content == content
    assert calls_of(output) == calls


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ('[TOOL_CALLS]get_weather[ARGS]{"city": "Pa', [("get_weather", {"city": "Pa"})]),
        ("[TOOL_CALLS]get_weather[ARGS]", [("get_weather", {})]),
        (
            '[TOOL_CALLS][{"name": "search", "arguments": {"tags": ["a", ',
            [("search", {"tags": ["a"]})],
        ),
    ],
)
def test_calls_cut_off_are_completed(
    text: str, calls: list[tuple[str, Any]], weather_tools: list[dict[str, Any]]
) -> None:
    output = check_splits(parser_factory("mistral", tools=weather_tools), text, markup=MARKUP)
    assert output.content is None
    assert calls_of(output) == calls


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("[TOOL_CALLS]get_wea", "get_wea"),
        ("[TOOL_CALLS]I cannot help.</s>", "I cannot help."),
        ("[TOOL_CALLS]", None),
    ],
)
def test_bodies_that_are_not_calls_are_content_without_the_special_token(
    text: str, content: str | None, weather_tools: list[dict[str, Any]]
) -> None:
    output = check_splits(parser_factory("mistral", tools=weather_tools), text, markup=MARKUP)
    assert (output.content, output.tool_calls) == (content, [])


def test_named_form_streams_arguments(weather_tools: list[dict[str, Any]]) -> None:
    parser = parser_factory("devstral", tools=weather_tools)()
    assert not parser.feed("[TOOL_CALLS]get_wea")
    first = parser.feed('ther[ARGS]{"ci')
    assert [(d.name, d.arguments) for d in first.tool_calls] == [("get_weather", "{")]
    second = parser.feed('ty": "Rome"}</s>')
    assert "".join(d.arguments for d in second.tool_calls) == '"city": "Rome"}'
