"""The frames that end a stream whose graph failed mid-stream, per API, validated against OpenAI's
published schemas (ResponseFailedEvent for Responses; ErrorResponse for chat completions)."""

from __future__ import annotations

import json
from typing import Any

from calculators.http.replies import SseEvent, SseEvents
from graphrt.http.stream_endings import ChatStreamFailure, ResponsesStreamFailure
from servables.llm.choices import Usage
from servables.llm.output_parsers import ToolCallDelta
from servables.openai.bodies import SSE_DONE
from servables.openai.responses import ResponsesStream, sse_event
from tests.unit.servables.test_responses_api import envelope
from tests.unit.servables.test_responses_schema import assert_valid

MESSAGE = 'Calculator::Process() for node "relay" failed: broke (request id 1a2b)'


def events_of(raw: bytes) -> list[dict[str, Any]]:
    """The `data:` payloads of SSE text, checking each repeats its `event:` name."""
    events = []
    for frame in raw.decode().split("\n\n"):
        if not frame:
            continue
        lines = frame.split("\n")
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        event = json.loads(lines[1][len("data: ") :])
        assert event["type"] == lines[0][len("event: ") :]
        events.append(event)
    return events


def test_responses_failure_ends_the_announced_response() -> None:
    stream = ResponsesStream(envelope())
    sent = [
        *stream.start(),
        *stream.update("", "Thinking", []),
        *stream.update("Hello", "", []),  # closes the reasoning item
        *stream.update(" there", "", []),
    ]
    raw = b"".join(map(sse_event, sent))
    failure = ResponsesStreamFailure("m")
    cut = len(raw) // 2 + 3  # chunks need not end on a frame boundary
    failure.sent(raw[:cut])
    failure.sent(raw[cut:])
    frames = failure.frames(MESSAGE, "server_error", None, None).encode()
    assert SSE_DONE not in frames and b"[DONE]" not in frames
    (event,) = events_of(frames)
    assert_valid("ResponseFailedEvent", event)
    assert_valid("ResponseStreamEvent", event)
    assert event["type"] == "response.failed"
    assert event["sequence_number"] == sent[-1]["sequence_number"] + 1
    response, created = event["response"], sent[0]["response"]
    assert response["status"] == "failed" and response["completed_at"] is None
    assert response["error"] == {"code": "server_error", "message": MESSAGE}
    assert {k: v for k, v in response.items() if k not in ("status", "error", "output")} == {
        k: v for k, v in created.items() if k not in ("status", "error", "output")
    }
    # the output items that were completed; the message still being written is not one
    assert [item["type"] for item in response["output"]] == ["reasoning"]
    assert response["output"][0]["content"][0]["text"] == "Thinking"
    # one failure, once
    assert failure.frames(MESSAGE, "server_error", None, None).encode() == b""


def test_responses_failure_reads_typed_events_as_the_graph_made_them() -> None:
    stream = ResponsesStream(envelope())
    sent = [*stream.start(), *stream.update("", "Thinking", []), *stream.update("Hi", "", [])]
    failure = ResponsesStreamFailure("m")
    failure.sent(SseEvents(tuple(SseEvent(event, event=event["type"]) for event in sent)))
    (event,) = events_of(failure.frames(MESSAGE, "server_error", None, None).encode())
    assert_valid("ResponseFailedEvent", event)
    assert event["sequence_number"] == sent[-1]["sequence_number"] + 1
    assert event["response"]["id"] == sent[0]["response"]["id"]
    assert [item["type"] for item in event["response"]["output"]] == ["reasoning"]


def test_responses_failure_code_is_a_response_error_code() -> None:
    stream = ResponsesStream(envelope())
    failure = ResponsesStreamFailure("m")
    failure.sent(b"".join(map(sse_event, stream.start())))
    (bad,) = events_of(failure.frames("bad input", "invalid_request_error", "input", "x").encode())
    assert_valid("ResponseFailedEvent", bad)
    assert bad["response"]["error"] == {"code": "invalid_prompt", "message": "bad input"}


def test_a_response_that_already_ended_gets_no_failure() -> None:
    for finish in ("stop", "length"):
        stream = ResponsesStream(envelope())
        sent = [*stream.update("Hi", "", []), *stream.finish(finish, Usage(3, 1))]
        failure = ResponsesStreamFailure("m")
        failure.sent(b"".join(map(sse_event, sent)))
        assert failure.frames(MESSAGE, "server_error", None, None).encode() == b""
    engine_failed = ResponsesStreamFailure("m")
    engine_failed.sent(
        b"".join(map(sse_event, ResponsesStream(envelope()).fail("x", "server_error")))
    )
    assert engine_failed.frames(MESSAGE, "server_error", None, None).encode() == b""


def test_responses_failure_without_an_announced_response() -> None:
    failure = ResponsesStreamFailure("m")
    failure.sent(b": a comment, and a frame that is not ours\n\ndata: [not json\n\n")
    (event,) = events_of(failure.frames(MESSAGE, "server_error", None, None).encode())
    assert_valid("ResponseFailedEvent", event)
    assert event["sequence_number"] == 0
    assert event["response"]["model"] == "m" and event["response"]["status"] == "failed"
    assert event["response"]["id"].startswith("resp_") and event["response"]["output"] == []


def test_responses_failure_keeps_completed_tool_calls() -> None:
    stream = ResponsesStream(envelope())
    sent = [
        *stream.update("", "", [ToolCallDelta(0, "call_1", "get_weather", '{"city": "Paris"}')]),
        *stream.update("", "", [ToolCallDelta(1, "call_2", "get_weather", '{"ci')]),
    ]
    failure = ResponsesStreamFailure("m")
    for event in sent:  # one chunk per event
        failure.sent(sse_event(event))
    (event,) = events_of(failure.frames(MESSAGE, "server_error", None, None).encode())
    assert_valid("ResponseFailedEvent", event)
    output = event["response"]["output"]
    assert [(item["type"], item["call_id"]) for item in output] == [("function_call", "call_1")]


def test_chat_failure_is_an_error_frame_then_done() -> None:
    failure = ChatStreamFailure("m")
    failure.sent(b'data: {"choices": []}\n\n')
    frames = failure.frames(MESSAGE, "server_error", None, None).encode()
    assert frames.endswith(SSE_DONE)
    error = json.loads(frames[: -len(SSE_DONE)].decode().removeprefix("data: "))
    assert_valid("ErrorResponse", error)
    assert error == {
        "error": {"message": MESSAGE, "type": "server_error", "param": None, "code": None}
    }


def test_a_chat_stream_that_sent_done_gets_no_failure() -> None:
    failure = ChatStreamFailure("m")
    failure.sent(b'data: {"choices": []}\n\n')
    failure.sent(SSE_DONE)
    assert failure.frames(MESSAGE, "server_error", None, None).encode() == b""
