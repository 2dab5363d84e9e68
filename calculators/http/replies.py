"""What a graph sends back for an HTTP request: typed replies, serialized once, at the route.

A calculator emits, on its HTTP_RESPONSE_PAYLOAD output,
- `JsonReply`: one JSON body (a unary answer);
- `SseEvents`: the server-sent events of one step of a stream (the first one starts the stream);
- `HttpReply`: a body of another content type (speech audio, a subtitle file), or any status;
- plain `bytes`, as graphs written for OVMS do: a JSON body, or SSE frames when the request
  streams.

Typed replies keep their values until the route writes them, so whatever watches a stream (how it
ends when it fails, a joined prompt batch, the voice nodes reading an LLM's answer) reads the
events themselves instead of parsing the bytes back. `encode` is the only serializer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_DONE_DATA = b"[DONE]"


def dumps(value: Any) -> bytes:
    """Compact JSON, non-ASCII kept as it is (what OpenAI's servers send)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True)
class JsonReply:
    """One JSON body, and response headers of its own (X-Voice)."""

    body: Any
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HttpReply:
    """A body that is not JSON (speech audio, a transcript as text or subtitles), as it is."""

    body: bytes
    content_type: str
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: `data` is a JSON value; `event` names it on an `event:` line (the
    Responses API does); `done` is chat/completions' closing `data: [DONE]`."""

    data: Any = None
    event: str | None = None
    done: bool = False

    def encode(self) -> bytes:
        if self.done:
            return b"data: [DONE]\n\n"
        data = b"data: " + dumps(self.data) + b"\n\n"
        return data if self.event is None else b"event: " + self.event.encode() + b"\n" + data


DONE = SseEvent(done=True)


@dataclass(frozen=True)
class SseEvents:
    """The events of one step of a stream, in order (maybe none: a step with nothing to say).
    `headers`: response headers of the stream's own (X-Voice), which only its first step can
    send (they go out before any event)."""

    events: tuple[SseEvent, ...]
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        data: Iterable[Any],
        *,
        done: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> SseEvents:
        """Events of plain JSON values, then `[DONE]` when `done`."""
        events = tuple(SseEvent(value) for value in data)
        return cls((*events, DONE) if done else events, dict(headers or {}))

    def encode(self) -> bytes:
        return b"".join(event.encode() for event in self.events)

    def __bool__(self) -> bool:
        return bool(self.events)

    def __add__(self, other: SseEvents) -> SseEvents:
        return SseEvents(self.events + other.events, {**other.headers, **self.headers})


Reply = JsonReply | SseEvents | HttpReply | bytes
StreamStep = SseEvents | bytes  # what a stream is made of after its first reply


def encode(reply: Reply) -> bytes:
    """The bytes a reply sends (a JsonReply's body, SSE frames, an HttpReply's body, bytes)."""
    if isinstance(reply, JsonReply):
        return dumps(reply.body)
    if isinstance(reply, SseEvents):
        return reply.encode()
    if isinstance(reply, HttpReply):
        return reply.body
    return bytes(reply)


def parse_events(frames: bytes) -> SseEvents:
    """The events in SSE frames a graph sent as bytes (graphs written for OVMS): the `data:`
    lines that hold JSON, and `[DONE]`; anything else is not an event of ours and is skipped."""
    events: list[SseEvent] = []
    for frame in frames.split(b"\n\n"):
        name: str | None = None
        for line in frame.split(b"\n"):
            line = line.strip()
            if line.startswith(b"event:"):
                name = line[len(b"event:") :].strip().decode(errors="replace")
            elif line.startswith(b"data:"):
                data = line[len(b"data:") :].strip()
                if data == _DONE_DATA:
                    events.append(DONE)
                    continue
                try:
                    events.append(SseEvent(json.loads(data), name))
                except ValueError:
                    continue
    return SseEvents(tuple(events))


def events_of(step: StreamStep) -> SseEvents:
    """A stream step's events, typed or sent as bytes."""
    return step if isinstance(step, SseEvents) else parse_events(step)


def json_of(reply: Reply) -> Any:
    """A unary answer's JSON value, typed or sent as bytes (None: not JSON)."""
    if isinstance(reply, JsonReply):
        return reply.body
    if isinstance(reply, SseEvents):
        return None
    data = reply.body if isinstance(reply, HttpReply) else bytes(reply)
    try:
        return json.loads(data)
    except ValueError:
        return None
