"""How a stream of each OpenAI API ends when it fails after its first bytes were sent.

The HTTP route writes the replies a graph produces without knowing their API; when the graph
fails mid-stream (a calculator raises, the run errors), the headers are out and the status cannot
say so: the stream itself must end the way that API's clients expect. Each API has its own
`StreamFailure`, which the route picks by the path's API (calculators.http.apis) and which sees
every reply the route sends: their events as the graph made them, or, from a graph that sends
bytes (written for OVMS), the events read back from its frames.

- chat completions and completions: one `data: {"error": {...}}` frame, then `data: [DONE]`
  (`ChatStreamFailure`; the openai SDK raises the error); nothing if `[DONE]` was already sent.
- Responses: a `response.failed` event and no `[DONE]` (Responses streams never use it)
  (`ResponsesStreamFailure`). Its Response is the one `response.created` announced (id,
  created_at, model, echoed request fields) with status "failed", an `error` {code, message} and
  the output items completed so far; it is numbered after the last event sent. A stream whose
  Response already ended (completed, incomplete or failed) gets nothing more.

An engine failure during a generation does not get here: HttpLLMCalculator ends its stream with
the same frames from its own state (responses_stream.ResponsesStream.fail) and the run succeeds.
"""

from __future__ import annotations

from typing import Any, Protocol

from calculators.http.replies import (
    DONE,
    SseEvent,
    SseEvents,
    StreamStep,
    events_of,
    parse_events,
)
from servables.openai.bodies import error_body
from servables.openai.responses.output import ResponseEnvelope, response_object

__all__ = [
    "ChatStreamFailure",
    "EventStreamFailure",
    "ResponsesStreamFailure",
    "StreamFailure",
    "responses_error_code",
]


class StreamFailure(Protocol):
    """Sees what a stream sent; renders the frames that end it when it fails."""

    def sent(self, step: StreamStep) -> None:
        """`step` went to the client."""

    def frames(
        self, message: str, error_type: str, param: str | None, code: str | None
    ) -> SseEvents:
        """The last events of the failed stream (OpenAI's error fields, as a status would say)."""


class ChatStreamFailure:
    """chat/completions and completions: the error object as a frame, then `[DONE]`; nothing once
    `[DONE]` went out (the client has stopped reading: a later node failed after the answer)."""

    def __init__(self, model: str = "") -> None:
        del model  # the error frame names no model
        self.done = False

    def sent(self, step: StreamStep) -> None:
        if isinstance(step, SseEvents):
            self.done = self.done or bool(step.events and step.events[-1].done)
        else:
            self.done = self.done or step.endswith(DONE.encode())

    def frames(
        self, message: str, error_type: str, param: str | None, code: str | None
    ) -> SseEvents:
        if self.done:
            return SseEvents(())
        return SseEvents((SseEvent(error_body(message, error_type, param, code)), DONE))


def responses_error_code(error_type: str) -> str:
    """A ResponseErrorCode for an error of OpenAI's `error_type` (the codes are a closed set)."""
    return "invalid_prompt" if error_type == "invalid_request_error" else "server_error"


# Events that end a Response: after one of them the stream has nothing more to say.
_FINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
# The request fields a Response must repeat, as OpenAI's defaults: for the Response of a stream
# that announced none (a custom graph's), whose request the route does not parse.
_DEFAULT_ECHO: dict[str, Any] = {
    "instructions": None,
    "parallel_tool_calls": True,
    "temperature": None,
    "top_p": None,
    "tool_choice": "auto",
    "tools": [],
    "metadata": {},
}


class ResponsesStreamFailure:
    """Responses: `response.failed` for the Response the stream announced; see the module doc."""

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.response: dict[str, Any] | None = None  # as response.created announced it
        self.items: list[dict[str, Any]] = []  # output items completed so far
        self.sequence = -1  # the last sequence_number sent
        self.ended = False
        self._pending = b""  # bytes: a frame cut between two replies

    def sent(self, step: StreamStep) -> None:
        if isinstance(step, SseEvents):
            events = step
        else:  # bytes need not end on a frame boundary: the rest waits for the next step
            complete, _, self._pending = (self._pending + step).rpartition(b"\n\n")
            events = parse_events(complete)
        for event in events.events:
            if isinstance(event.data, dict):
                self._seen(event.data)

    def _seen(self, event: dict[str, Any]) -> None:
        number = event.get("sequence_number")
        if isinstance(number, int):
            self.sequence = max(self.sequence, number)
        kind = event.get("type")
        if kind in ("response.created", "response.in_progress") and isinstance(
            event.get("response"), dict
        ):
            self.response = event["response"]
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.items.append(event["item"])
        elif kind in _FINAL:
            self.ended = True

    def frames(
        self, message: str, error_type: str, param: str | None, code: str | None
    ) -> SseEvents:
        del param, code  # a Response's error is {code, message}, its code from a closed set
        if self.ended:
            return SseEvents(())
        error = {"code": responses_error_code(error_type), "message": message}
        if self.response is not None:
            response = {
                **self.response,
                "status": "failed",
                "completed_at": None,
                "error": error,
                "output": list(self.items),
            }
        else:  # the graph sent no response.created: a Response of our own
            response = response_object(
                ResponseEnvelope(self.model, dict(_DEFAULT_ECHO)), "failed", self.items, error=error
            )
        self.ended = True
        event = {"type": "response.failed", "sequence_number": self.sequence + 1}
        return SseEvents((SseEvent({**event, "response": response}, event="response.failed"),))


class EventStreamFailure:
    """Image and transcription streams (typed events, no `[DONE]`): one `data: {"error": ...}`
    frame, which OpenAI's SDKs raise; nothing once `transcript.text.done` went out."""

    FINAL = "transcript.text.done"

    def __init__(self, model: str = "") -> None:
        del model  # the error frame names no model
        self.done = False

    def sent(self, step: StreamStep) -> None:
        for event in events_of(step).events:
            if isinstance(event.data, dict) and event.data.get("type") == self.FINAL:
                self.done = True

    def frames(
        self, message: str, error_type: str, param: str | None, code: str | None
    ) -> SseEvents:
        if self.done:
            return SseEvents(())
        return SseEvents((SseEvent(error_body(message, error_type, param, code)),))
