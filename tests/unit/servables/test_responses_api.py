"""Responses API: request translation, Response objects and the event stream, validated
against OpenAI's published schemas (Response, ResponseStreamEvent), and chat bodies with tool
calls and reasoning (CreateChatCompletionResponse / StreamResponse)."""

from __future__ import annotations

from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.llm.choices import Usage
from servables.llm.output_parsers import ParsedOutput, ToolCall, ToolCallDelta
from servables.llm.request import Limits
from servables.openai.bodies import Choice, ResponseBuilder
from servables.openai.responses import (
    ResponseEnvelope,
    ResponsesStream,
    parse_responses_request,
    response_object,
    unary_output,
)
from tests.unit.servables.test_responses_schema import assert_valid

LIMITS = Limits()
TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def test_request_becomes_a_chat_request() -> None:
    parsed = parse_responses_request(
        {
            "model": "m",
            "instructions": "Be brief.",
            "input": [
                {"role": "developer", "content": "Use tools."},
                {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
                {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": "{}",
                },
                {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            ],
            "max_output_tokens": 7,
            "tools": TOOLS,
            "tool_choice": "auto",
            "text": {"format": {"type": "json_object"}},
            "reasoning": {"effort": "low"},
            "store": True,
            "metadata": {"k": "v"},
        },
        LIMITS,
    )
    request = parsed.generation
    assert [m["role"] for m in request.messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert request.messages[3]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert request.messages[4] == {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    assert request.sampling.max_tokens == 7
    assert request.tool_choice.mode == "auto" and request.tools
    assert request.chat_template_kwargs == {"enable_thinking": True}
    assert request.constraint is not None and request.constraint.kind == "json_schema"
    assert parsed.echo["metadata"] == {"k": "v"} and parsed.echo["store"] is True


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x", "previous_response_id": "resp_1"}, "previous_response_id"),
        ({"input": "x", "conversation": "c"}, "conversation"),
        ({}, "input"),
        ({"input": [{"type": "file_search_call"}]}, "input[0]"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format.type"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        (
            {
                "input": "x",
                "tools": TOOLS,
                "tool_choice": "required",
                "text": {"format": {"type": "json_object"}},
            },
            "tool_choice",
        ),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_responses_request({"model": "m", **body}, LIMITS)
    assert info.value.param == param


def envelope() -> ResponseEnvelope:
    parsed = parse_responses_request({"model": "m", "input": "x", "tools": TOOLS}, LIMITS)
    return ResponseEnvelope("m", parsed.echo)


def test_unary_response_validates() -> None:
    parsed = ParsedOutput(
        "It is sunny.", "Let me think.", [ToolCall("call_1", "get_weather", "{}")]
    )
    for incomplete in (False, True):
        output = unary_output(parsed, incomplete)
        assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
        status = "incomplete" if incomplete else "completed"
        body = response_object(envelope(), status, output, Usage(5, 3), incomplete=incomplete)
        assert_valid("Response", body)
        assert (body["incomplete_details"] is not None) is incomplete


def test_stream_events_validate_and_follow_openais_order() -> None:
    stream = ResponsesStream(envelope())
    events = stream.start()
    events += stream.update("", "Thinking", [])
    events += stream.update("Hello", " more", [])  # within an update, reasoning comes first
    events += stream.update("", "", [ToolCallDelta(0, "call_1", "get_weather", '{"ci')])
    events += stream.update("", "", [ToolCallDelta(0, arguments='ty": "Paris"}')])
    events += stream.finish("stop", Usage(4, 9))
    for event in events:
        assert_valid("ResponseStreamEvent", event)
    assert [event["sequence_number"] for event in events] == list(range(len(events)))
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    final = events[-1]["response"]
    assert [item["type"] for item in final["output"]] == ["reasoning", "message", "function_call"]
    assert final["output"][0]["content"][0]["text"] == "Thinking more"
    assert final["output"][2]["arguments"] == '{"city": "Paris"}'
    done = [e for e in events if e["type"] == "response.function_call_arguments.done"]
    assert done[0]["arguments"] == '{"city": "Paris"}'
    failed = ResponsesStream(envelope())
    failure = failed.fail("engine stopped", "server_error")
    assert_valid("ResponseStreamEvent", failure[0])
    empty = ResponsesStream(envelope())
    closing = empty.finish("length", Usage(1, 0))
    assert closing[-1]["type"] == "response.incomplete"
    for event in closing:
        assert_valid("ResponseStreamEvent", event)


def test_chat_bodies_with_tool_calls_and_reasoning_validate() -> None:
    builder = ResponseBuilder("chat", "m", include_usage=True)
    call = ToolCall("call_1", "get_weather", '{"city": "Paris"}')
    body = builder.unary([Choice(0, None, "tool_calls", None, "why", [call])], Usage(3, 4))
    assert_valid("CreateChatCompletionResponse", body)
    message = body["choices"][0]["message"]
    assert (
        message["content"] is None and message["tool_calls"][0]["function"]["name"] == "get_weather"
    )
    assert message["reasoning_content"] == "why"
    chunk = builder.delta_chunk(
        0, "", reasoning="hm", tool_calls=[ToolCallDelta(0, "call_1", "get_weather", "{")]
    )
    assert_valid("CreateChatCompletionStreamResponse", chunk)
    more = builder.delta_chunk(0, "", tool_calls=[ToolCallDelta(0, arguments="}")])
    assert_valid("CreateChatCompletionStreamResponse", more)
    assert "id" not in more["choices"][0]["delta"]["tool_calls"][0]


def test_reasoning_tokens_are_counted_in_the_usage() -> None:
    def words(text: str) -> int:  # a fake tokenizer: one token per word
        return len(text.split())

    stream = ResponsesStream(envelope(), words)
    events = stream.start()
    events += stream.update("", "Let me", [])  # what a reasoning parser extracted, streamed
    events += stream.update("", " think hard", [])
    events += stream.update("Sunny.", "", [])
    events += stream.finish("stop", Usage(4, 9))
    usage = events[-1]["response"]["usage"]
    assert usage["output_tokens_details"] == {"reasoning_tokens": 4}
    assert usage["output_tokens"] == 9
    assert_valid("ResponseStreamEvent", events[-1])
    plain = ResponsesStream(envelope(), words)
    closing = [*plain.update("Sunny.", "", []), *plain.finish("stop", Usage(4, 2))]
    assert closing[-1]["response"]["usage"]["output_tokens_details"] == {"reasoning_tokens": 0}
    unary = response_object(envelope(), "completed", [], Usage(5, 3), reasoning_tokens=2)
    assert unary["usage"]["output_tokens_details"] == {"reasoning_tokens": 2}
    capped = response_object(envelope(), "completed", [], Usage(5, 3), reasoning_tokens=7)
    assert capped["usage"]["output_tokens_details"] == {"reasoning_tokens": 3}


def test_created_and_in_progress_come_once_however_the_stream_starts() -> None:
    stream = ResponsesStream(envelope())
    first = stream.start()
    assert [event["type"] for event in first] == ["response.created", "response.in_progress"]
    assert stream.start() == []
    late = ResponsesStream(envelope())  # not started by the caller: the first events start it
    kinds = [event["type"] for event in late.update("Hi", "", [])]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    failed = ResponsesStream(envelope()).fail("engine stopped", "server_error")
    assert [event["type"] for event in failed] == [
        "response.created",
        "response.in_progress",
        "response.failed",
    ]
