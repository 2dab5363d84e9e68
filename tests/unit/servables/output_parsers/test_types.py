"""The shared value types: call ids, and joining deltas as an OpenAI client joins chunks."""

from __future__ import annotations

import re

from servables.llm.output_parsers import ParsedDelta, ParsedOutput, ToolCall, ToolCallDelta
from servables.llm.output_parsers.base import assemble
from servables.llm.output_parsers.types import new_call_id


def test_call_ids_look_like_openai_ids_and_differ() -> None:
    ids = {new_call_id() for _ in range(100)}
    assert len(ids) == 100
    assert all(re.fullmatch(r"call_[A-Za-z0-9]{24}", call_id) for call_id in ids)


def test_assemble_joins_channels_and_calls_by_index() -> None:
    deltas = [
        ParsedDelta(reasoning="think"),
        ParsedDelta(content="Hi", reasoning="ing"),
        ParsedDelta(tool_calls=[ToolCallDelta(index=0, id="call_a", name="f")]),
        ParsedDelta(tool_calls=[ToolCallDelta(index=0, arguments='{"x": ')]),
        ParsedDelta(tool_calls=[ToolCallDelta(index=1, id="call_b", name="g", arguments="{}")]),
        ParsedDelta(tool_calls=[ToolCallDelta(index=0, arguments="1}")]),
    ]
    assert assemble(deltas) == ParsedOutput(
        content="Hi",
        reasoning="thinking",
        tool_calls=[
            ToolCall(id="call_a", name="f", arguments='{"x": 1}'),
            ToolCall(id="call_b", name="g", arguments="{}"),
        ],
    )


def test_empty_channels_are_none_and_empty_delta_is_falsy() -> None:
    assert assemble([ParsedDelta()]) == ParsedOutput(content=None, reasoning=None, tool_calls=[])
    assert not ParsedDelta()
    assert ParsedDelta(content="x")
