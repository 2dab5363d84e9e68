"""qwen3 reasoning: `<think>...</think>` (Qwen3, QwQ, DeepSeek-R1 and distills), alone and
before tool calls.

Samples follow the models' output: Qwen3 with thinking on writes "<think>\\n...\\n</think>\\n\\n"
then the answer; with a thinking template (Qwen3.6, DeepSeek-R1) the prompt already holds
"<think>\\n" and the output starts inside the block.
"""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers import make_output_parser
from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

MARKUP = ("<think>", "</think>")

CASES: dict[str, tuple[str, bool, str | None, str | None]] = {
    # name: (output, starts_in_reasoning, content, reasoning)
    "qwen3 thinking": (
        "<think>\nThe user asks for 2+2. That is 4.\n</think>\n\nThe answer is **4**.",
        False,
        "The answer is **4**.",
        "The user asks for 2+2. That is 4.",
    ),
    "prompt opened the block": (
        "Okay, let me think.\nParis is the capital.\n</think>\n\nParis.",
        True,
        "Paris.",
        "Okay, let me think.\nParis is the capital.",
    ),
    "model repeats the opening tag the prompt already wrote": (
        "<think>\nHmm.\n</think>\n\nYes.",
        True,
        "Yes.",
        "Hmm.",
    ),
    "no reasoning at all": ("Just an answer.", False, "Just an answer.", None),
    "empty reasoning block (enable_thinking=False style)": (
        "<think>\n\n</think>\n\nShort answer.",
        False,
        "Short answer.",
        None,
    ),
    "a <think> later in the answer is content": (
        "Use the <think> tag like this: <think>x</think>.",
        False,
        "Use the <think> tag like this: <think>x</think>.",
        None,
    ),
    "unicode and tag-like text inside reasoning": (
        "<think>\n日本語で考える 🤔 </thi and <think>\n</think>\nDone ✓",
        False,
        "Done ✓",
        "日本語で考える 🤔 </thi and <think>",
    ),
    "leading whitespace before the block": (
        "\n\n<think>\nwhy\n</think>\nbecause",
        False,
        "because",
        "why",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_reasoning_is_split_from_content_the_same_unary_and_streamed(case: str) -> None:
    text, starts_in_reasoning, content, reasoning = CASES[case]
    make = parser_factory(None, "qwen3", tools=None, starts_in_reasoning=starts_in_reasoning)
    output = check_splits(make, text)
    assert (output.content, output.reasoning) == (content, reasoning)
    assert output.tool_calls == []


@pytest.mark.parametrize("starts_in_reasoning", [False, True])
def test_generation_cut_off_inside_reasoning_stays_reasoning(starts_in_reasoning: bool) -> None:
    # finish_reason=length inside <think>: OVMS issue #4495 shows the text landing in content.
    text = ("" if starts_in_reasoning else "<think>\n") + "Let me count: 1, 2, 3, and </thi"
    make = parser_factory(None, "qwen3", tools=None, starts_in_reasoning=starts_in_reasoning)
    output = check_splits(make, text, markup=MARKUP)
    assert output.content is None
    assert output.reasoning == "Let me count: 1, 2, 3, and </thi"


def test_reasoning_streams_before_the_block_closes() -> None:
    parser = parser_factory(None, "qwen3", tools=None)()
    assert parser.feed("<thi").reasoning == ""
    assert parser.feed("nk>\nStep one").reasoning == "Step one"
    assert parser.feed(", step two.\n</th").reasoning == ", step two."
    delta = parser.feed("ink>\n\nDone")
    assert (delta.reasoning, delta.content) == ("", "Done")


def test_reasoning_then_a_tool_call(weather_tools: list[dict[str, Any]]) -> None:
    text = (
        "<think>\nI should call get_weather. Maybe <tool_call> inside thoughts is not a call."
        '\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lyon"}}\n'
        "</tool_call>"
    )
    output = check_splits(
        parser_factory("hermes3", "qwen3", tools=weather_tools),
        text,
        markup=(*MARKUP, "</tool_call>"),
    )
    assert output.content is None
    assert output.reasoning == (
        "I should call get_weather. Maybe <tool_call> inside thoughts is not a call."
    )
    assert calls_of(output) == [("get_weather", {"city": "Lyon"})]


def test_without_tools_reasoning_is_still_split_and_tool_markup_is_content() -> None:
    parser = make_output_parser("hermes3", "qwen3", tools=None)
    assert parser is not None
    assert not parser.keep_special_tokens
    output = parser.parse("<think>hm</think><tool_call>{}</tool_call>")
    assert (output.reasoning, output.content, output.tool_calls) == (
        "hm",
        "<tool_call>{}</tool_call>",
        [],
    )
