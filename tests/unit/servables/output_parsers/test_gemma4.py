"""gemma4: Gemma 4's `<|tool_call>call:name{key:<|"|>text<|"|>,...}<tool_call|>` and its
`<|channel>thought ... <channel|>` reasoning, special tokens kept (OVMS's Gemma4 parsers)."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.gemma4_calls import parse_calls
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

OPEN, CLOSE, Q = "<|tool_call>", "<tool_call|>", '<|"|>'

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "one call": (
        f"{OPEN}call:get_weather{{city:{Q}Paris{Q},unit:{Q}celsius{Q}}}{CLOSE}<turn|>",
        None,
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
    "two calls in one block, after text": (
        f"Checking.{OPEN}call:get_weather{{city:{Q}Oslo{Q}}}"
        f"call:search{{query:{Q}a, b: {{c}}{Q},limit:3,exact:true,tags:[{Q}x{Q},{Q}y{Q}],"
        f"extra:null,nested:{{depth:2.5}}}}{CLOSE}",
        "Checking.",
        [
            ("get_weather", {"city": "Oslo"}),
            (
                "search",
                {
                    "query": "a, b: {c}",
                    "limit": 3,
                    "exact": True,
                    "tags": ["x", "y"],
                    "extra": None,
                    "nested": {"depth": 2.5},
                },
            ),
        ],
    ),
    "plain answer": ("It is 20 °C in Paris.<turn|>", "It is 20 °C in Paris.", []),
}


@pytest.mark.parametrize("case", CASES)
def test_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    output = check_splits(
        parser_factory("gemma4", tools=weather_tools), text, markup=(OPEN, CLOSE, "<turn|>")
    )
    assert output.content == content
    assert calls_of(output) == calls


def test_a_block_that_is_not_calls_is_given_back(weather_tools: list[dict[str, Any]]) -> None:
    output = check_splits(parser_factory("gemma4", tools=weather_tools), f"{OPEN}hello{CLOSE}")
    assert calls_of(output) == [] and output.content == "hello"


def test_reasoning_in_the_thought_channel(weather_tools: list[dict[str, Any]]) -> None:
    call = f"{OPEN}call:get_weather{{city:{Q}Rome{Q}}}{CLOSE}"
    text = f"<|channel>thought\nThey want weather.<channel|>{call}"
    output = check_splits(parser_factory("gemma4", "gemma4", tools=weather_tools), text)
    assert output.reasoning == "They want weather."
    assert calls_of(output) == [("get_weather", {"city": "Rome"})]
    plain = check_splits(
        parser_factory(None, "gemma4", tools=None), "<|channel>thought\nHmm.<channel|>Blue.<turn|>"
    )
    assert (plain.reasoning, plain.content) == ("Hmm.", "Blue.")


@pytest.mark.parametrize("text", ["call:f{a:1", "call:f{a:}", "f{a:1}", f"call:f{{a:{Q}x}}"])
def test_broken_syntax_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_calls(text)
