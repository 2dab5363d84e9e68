"""gptoss: gpt-oss's harmony channels, fed with special tokens kept.

Samples follow OpenAI's harmony format guide and OVMS's gptoss tests: reasoning on the analysis
channel, the answer on final, preambles on commentary, calls to `functions.NAME`.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = (
    "<|channel|>",
    "<|message|>",
    "<|start|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|constrain|>",
    "analysis",
    "commentary",
    "assistant",
)

ANALYSIS = (
    "<|channel|>analysis<|message|>User asks weather in Tokyo. Need to call get_weather.<|end|>"
)
CALL = (
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"Tokyo","unit":"celsius"}<|call|>'
)

CASES: dict[str, tuple[str, str | None, str | None, list[tuple[str, Any]]]] = {
    "reasoning then answer": (
        "<|channel|>analysis<|message|>Simple greeting.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Hello! How can I help?<|return|>",
        "Hello! How can I help?",
        "Simple greeting.",
        [],
    ),
    "reasoning then a call": (
        ANALYSIS + CALL,
        None,
        "User asks weather in Tokyo. Need to call get_weather.",
        [("get_weather", {"city": "Tokyo", "unit": "celsius"})],
    ),
    "preamble and two calls": (
        ANALYSIS
        + "<|start|>assistant<|channel|>commentary<|message|>Checking two things.<|end|>"
        + CALL
        + "<|start|>assistant<|channel|>commentary to=functions.search <|constrain|>json"
        '<|message|>{"query": "Tokyo \\"events\\" to=functions.x <|", "limit": 3}<|call|>',
        "Checking two things.",
        "User asks weather in Tokyo. Need to call get_weather.",
        [
            ("get_weather", {"city": "Tokyo", "unit": "celsius"}),
            ("search", {"query": 'Tokyo "events" to=functions.x <|', "limit": 3}),
        ],
    ),
    "recipient in the role header": (
        "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
        '{"city": "Kyoto"}<|call|>',
        None,
        None,
        [("get_weather", {"city": "Kyoto"})],
    ),
    "call without arguments": (
        "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|><|call|>",
        None,
        None,
        [("get_time", {})],
    ),
    "two reasoning messages and two content messages are joined by a space": (
        "<|channel|>analysis<|message|>One.<|end|><|start|>assistant<|channel|>analysis"
        "<|message|>Two.<|end|><|start|>assistant<|channel|>commentary<|message|>Pre."
        "<|end|><|start|>assistant<|channel|>final<|message|>Ünïcode ✓ answer.<|return|>",
        "Pre. Ünïcode ✓ answer.",
        "One. Two.",
        [],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_real_outputs_parse_the_same_unary_and_streamed(
    case: str, weather_tools: list[dict[str, Any]]
) -> None:
    text, content, reasoning, calls = CASES[case]
    markup = MARKUP if "events" not in text else ()
    output = check_splits(
        parser_factory("gptoss", "gptoss", tools=weather_tools), text, markup=markup
    )
    assert (output.content, output.reasoning) == (content, reasoning)
    assert calls_of(output) == calls


def test_generation_cut_off_in_each_part(weather_tools: list[dict[str, Any]]) -> None:
    make = parser_factory("gptoss", "gptoss", tools=weather_tools)
    in_reasoning = check_splits(make, "<|channel|>analysis<|message|>Still thinking", markup=MARKUP)
    assert (in_reasoning.reasoning, in_reasoning.content) == ("Still thinking", None)
    in_header = check_splits(make, ANALYSIS + "<|start|>assistant<|channel|>fin", markup=MARKUP)
    assert in_header.content is None
    in_call = check_splits(make, ANALYSIS + CALL[: CALL.index("celsius")], markup=MARKUP)
    assert calls_of(in_call) == [("get_weather", {"city": "Tokyo", "unit": ""})]


def test_a_model_that_ignores_the_format_still_answers(weather_tools: list[dict[str, Any]]) -> None:
    output = check_splits(parser_factory("gptoss", "gptoss", tools=weather_tools), "Plain text.")
    assert output.content == "Plain text."


def test_without_tools_a_call_body_is_content_and_reasoning_is_kept() -> None:
    parser = make_output_parser("gptoss", "gptoss", tools=None)
    assert parser is not None and parser.keep_special_tokens
    output = parser.parse(ANALYSIS + CALL)
    assert output.tool_calls == []
    assert output.content == '{"city":"Tokyo","unit":"celsius"}'
    assert output.reasoning == "User asks weather in Tokyo. Need to call get_weather."


def test_without_the_reasoning_parser_analysis_is_not_shown(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = make_output_parser("gptoss", None, tools=weather_tools)
    assert parser is not None
    output = parser.parse(ANALYSIS + CALL)
    assert output.reasoning is None
    assert calls_of(output) == [("get_weather", {"city": "Tokyo", "unit": "celsius"})]


def test_the_call_is_named_at_its_header_and_arguments_stream(
    weather_tools: list[dict[str, Any]],
) -> None:
    parser = parser_factory("gptoss", "gptoss", tools=weather_tools)()
    assert parser.feed(ANALYSIS).reasoning.startswith("User asks")
    first = parser.feed(CALL[: CALL.index("Tokyo")])
    assert [(d.name, d.arguments) for d in first.tool_calls] == [("get_weather", '{"city":"')]
    rest = parser.feed(CALL[CALL.index("Tokyo") :])
    assert "".join(d.arguments for d in rest.tool_calls) == 'Tokyo","unit":"celsius"}'
