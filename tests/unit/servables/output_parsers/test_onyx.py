"""onyx: turns addressed `to=self` (reasoning) or elsewhere (content), ended by `<|eom|>` or
`<|eot|>`, and ATEM tool calls typed by the tool's schema (OVMS's Onyx parsers)."""

from __future__ import annotations

from typing import Any

import pytest

from servables.llm.output_parsers.testing import calls_of, check_splits, parser_factory

CALL = (
    '<atem:function_calls><atem:invoke name="get_weather">'
    '<atem:parameter name="city">Paris</atem:parameter>'
    '<atem:parameter name="days">3</atem:parameter>'
    "</atem:invoke></atem:function_calls>"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}},
        },
    },
]

CASES: dict[str, tuple[str, str | None, str | None, list[tuple[str, Any]]]] = {
    "reasoning then an answer": (
        " to=self<|message|>The user greets me.<|eom|><|start|>assistant to=user<|message|>"
        "Hello!<|eot|>",
        "The user greets me.",
        "Hello!",
        [],
    ),
    "reasoning then a call": (
        " to=self<|message|>Need weather.<|eom|><|start|>assistant to=functions<|message|>"
        + CALL
        + "<|eom|>",
        "Need weather.",
        None,
        [("get_weather", {"city": "Paris", "days": 3})],
    ),
    "a string parameter stays a string": (
        ' to=functions<|message|><atem:function_calls><atem:invoke name="lookup">'
        '<atem:parameter name="code">007</atem:parameter></atem:invoke>'
        "</atem:function_calls><|eom|>",
        None,
        None,
        [("lookup", {"code": "007"})],
    ),
    "text with no envelope is content": ("Just an answer.<|eot|>", None, "Just an answer.", []),
}


@pytest.mark.parametrize("case", CASES)
def test_outputs_parse_the_same_unary_and_streamed(case: str) -> None:
    text, reasoning, content, calls = CASES[case]
    output = check_splits(parser_factory("onyx", "onyx", tools=TOOLS), text)
    assert (output.reasoning or None) == reasoning
    assert output.content == content
    assert calls_of(output) == calls


def test_without_tools_only_the_turns_are_taken_apart() -> None:
    text = " to=self<|message|>Hmm.<|eom|><|start|>assistant to=user<|message|>Blue.<|eot|>"
    output = check_splits(parser_factory(None, "onyx", tools=None), text)
    assert (output.reasoning, output.content) == ("Hmm.", "Blue.")
