"""lfm2: Liquid's LFM2 / LFM2.5, `<|tool_call_start|>[name(arg=value), ...]<|tool_call_end|>`
with Python literals, and LFM2.5's `<think>` reasoning; the markers are special tokens, so the
text keeps them and the other special tokens (end of turn) are dropped, as OVMS's parsers do."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.registry import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory
from servables.llm.output_parsers.types import ParserConfigError

START, END = "<|tool_call_start|>", "<|tool_call_end|>"

CASES: dict[str, tuple[str, str | None, list[tuple[str, Any]]]] = {
    "one call": (
        f'{START}[get_weather(city="Paris", unit="celsius")]{END}<|im_end|>',
        None,
        [("get_weather", {"city": "Paris", "unit": "celsius"})],
    ),
    "parallel calls after text, Python literals": (
        f"Let me check.{START}[get_weather(city='Kraków'), "
        f"search(query=\"rain\", limit=3, exact=True, tags=['a', 'b'], extra=None)]{END}",
        "Let me check.",
        [
            ("get_weather", {"city": "Kraków"}),
            (
                "search",
                {"query": "rain", "limit": 3, "exact": True, "tags": ["a", "b"], "extra": None},
            ),
        ],
    ),
    "plain answer with end of turn": (
        "It is 20 °C in Paris.<|im_end|>",
        "It is 20 °C in Paris.",
        [],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, calls = CASES[case]
    output = check_splits(
        parser_factory("lfm2", tools=weather_tools), text, markup=(START, END, "<|im_end|>")
    )
    assert output.content == content
    assert calls_of(output) == calls


def test_reasoning_then_a_call(weather_tools: list[dict[str, Any]]) -> None:
    text = f'<think>The user wants weather.</think>{START}[get_weather(city="Oslo")]{END}<|im_end|>'
    output = check_splits(parser_factory("lfm2", "lfm2", tools=weather_tools), text)
    assert output.reasoning == "The user wants weather."
    assert calls_of(output) == [("get_weather", {"city": "Oslo"})]
    assert output.content is None


def test_reasoning_without_tools_keeps_special_tokens_and_drops_end_of_turn() -> None:
    parser = make_output_parser(None, "lfm2", tools=None)
    assert parser is not None and parser.keep_special_tokens
    output = check_splits(
        parser_factory(None, "lfm2", tools=None), "<think>Hmm.</think>Blue.<|im_end|>"
    )
    assert (output.reasoning, output.content) == ("Hmm.", "Blue.")


def test_a_call_cut_off_gives_its_text_back(weather_tools: list[dict[str, Any]]) -> None:
    output = check_splits(parser_factory("lfm2", tools=weather_tools), f"{START}[get_wea")
    assert calls_of(output) == []
    assert output.content == "[get_wea"


def test_lfm2_pairs_only_with_parsers_that_keep_special_tokens() -> None:
    with pytest.raises(ParserConfigError, match="cannot be combined"):
        make_output_parser("lfm2", "qwen3", tools=[{"type": "function", "function": {"name": "f"}}])
