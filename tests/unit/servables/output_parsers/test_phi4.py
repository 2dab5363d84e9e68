"""phi4: Phi-4-mini's `functools[{"name": ..., "arguments": {...}}, ...]`."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "one call": (
        'functools[{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]',
        None,
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
    "parallel calls with text before": (
        'I will check.\nfunctools[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "search", "arguments": {"query": "functools[ ]", "exact": true}}]',
        "I will check.",
        [
            ("get_weather", {"city": "Paris"}),
            ("search", {"query": "functools[ ]", "exact": True}),
        ],
    ),
    "unicode": (
        'functools[{"name": "search", "arguments": {"query": "Kraków → Łódź \\u2713"}}]',
        None,
        [("search", {"query": "Kraków → Łódź ✓"})],
    ),
    "the word functools in an answer": (
        "Python's functools module has lru_cache; import functools first.",
        "Python's functools module has lru_cache; import functools first.",
        [],
    ),
    "plain answer": ("It is 20 °C in Paris.", "It is 20 °C in Paris.", []),
}


@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    markup = (
        ("functools[",) if "functools[ ]" not in text and "functools" not in (content or "") else ()
    )
    output = check_splits(parser_factory("phi4", tools=weather_tools), text, markup=markup)
    assert output.content == content
    assert calls_of(output) == calls


def test_a_list_cut_off_keeps_the_calls_it_started(weather_tools: list[dict[str, Any]]) -> None:
    text = 'functools[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "sea'
    output = check_splits(parser_factory("phi4", tools=weather_tools), text)
    assert calls_of(output) == [("get_weather", {"city": "Paris"})]
    assert output.content == '{"name": "sea'
