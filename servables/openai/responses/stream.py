"""Responses API streaming: the parsed pieces of one generation as OpenAI's event sequence.

Every event is numbered by `sequence_number`; reasoning streams as `response.reasoning_text.*`
events (the events OpenAI sends for open-weight models' raw reasoning, which the openai SDK
parses). Its own module because the stream is a state machine (one open item at a time) with
nothing in common with request parsing; the items it opens and closes are built by
responses_output.py, the same builders the unary answer uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from servables.llm.choices import Usage
from servables.llm.output_parsers import ToolCall, ToolCallDelta
from servables.openai.responses.output import (
    ResponseEnvelope,
    call_item,
    message_item,
    new_id,
    reasoning_item,
    response_object,
    text_part,
)

__all__ = ["ResponsesStream"]


@dataclass
class _OpenItem:
    kind: str  # "reasoning", "message" or "function_call"
    item_id: str
    output_index: int
    text: list[str] = field(default_factory=list)
    call: ToolCall | None = None  # for function calls: id and name (arguments in `text`)
    call_index: int = -1


class ResponsesStream:
    """Turns the parsed pieces of one streamed generation into Responses events.

    One output item is open at a time; a piece of another kind (reasoning, content or a new
    tool call) closes it and opens the next, so items follow the order the model wrote them.
    """

    def __init__(
        self, envelope: ResponseEnvelope, count_tokens: Callable[[str], int] | None = None
    ) -> None:
        self.envelope = envelope
        # Counts the tokens of the reasoning text, for `output_tokens_details.reasoning_tokens`.
        self.count_tokens = count_tokens
        self.reasoning: list[str] = []
        self.started = False
        self.sequence = 0
        self.items: list[dict[str, Any]] = []  # closed items, for the final Response
        self.open: _OpenItem | None = None
        self.calls: dict[int, _OpenItem] = {}

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    def start(self) -> list[dict[str, Any]]:
        """`response.created` and `response.in_progress`: sent as soon as the request is taken."""
        if self.started:
            return []
        self.started = True
        response = response_object(self.envelope, "in_progress", [])
        return [
            self._event("response.created", response=response),
            self._event("response.in_progress", response=response),
        ]

    def update(
        self, content: str, reasoning: str, tool_calls: Sequence[ToolCallDelta]
    ) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.start()
        if reasoning:
            self.reasoning.append(reasoning)
            events += self._text("reasoning", reasoning)
        if content:
            events += self._text("message", content)
        for call in tool_calls:
            events += self._call(call)
        return events

    def _open(self, kind: str, prefix: str) -> tuple[_OpenItem, list[dict[str, Any]]]:
        events = self._close("completed")
        item = _OpenItem(kind, new_id(prefix), len(self.items))
        self.open = item
        return item, events

    def _ensure(self, kind: str) -> list[dict[str, Any]]:
        """Open a reasoning or message item unless one of that kind is open."""
        events: list[dict[str, Any]] = []
        item = self.open
        if item is None or item.kind != kind:
            item, events = self._open(kind, "rs_" if kind == "reasoning" else "msg_")
            empty = (
                reasoning_item(item.item_id, "", "in_progress")
                if kind == "reasoning"
                else message_item(item.item_id, "", "in_progress")
            )
            part = {"type": "reasoning_text", "text": ""} if kind == "reasoning" else text_part("")
            events.append(
                self._event(
                    "response.output_item.added", output_index=item.output_index, item=empty
                )
            )
            events.append(
                self._event(
                    "response.content_part.added",
                    item_id=item.item_id,
                    output_index=item.output_index,
                    content_index=0,
                    part=part,
                )
            )
        return events

    def _text(self, kind: str, text: str) -> list[dict[str, Any]]:
        events = self._ensure(kind)
        item = self.open
        assert item is not None
        item.text.append(text)
        delta_type = (
            "response.reasoning_text.delta" if kind == "reasoning" else "response.output_text.delta"
        )
        extra: dict[str, Any] = {} if kind == "reasoning" else {"logprobs": []}
        events.append(
            self._event(
                delta_type,
                item_id=item.item_id,
                output_index=item.output_index,
                content_index=0,
                delta=text,
                **extra,
            )
        )
        return events

    def _call(self, delta: ToolCallDelta) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        item = self.calls.get(delta.index)
        if item is None:
            item, events = self._open("function_call", "fc_")
            item.call = ToolCall(delta.id or new_id("call_"), delta.name or "", "")
            item.call_index = delta.index
            self.calls[delta.index] = item
            events.append(
                self._event(
                    "response.output_item.added",
                    output_index=item.output_index,
                    item=call_item(item.item_id, item.call.id, item.call.name, "", "in_progress"),
                )
            )
        if delta.arguments:
            item.text.append(delta.arguments)
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=item.item_id,
                    output_index=item.output_index,
                    delta=delta.arguments,
                )
            )
        return events

    def _close(self, status: str) -> list[dict[str, Any]]:
        item, self.open = self.open, None
        if item is None:
            return []
        text = "".join(item.text)
        events: list[dict[str, Any]] = []
        if item.kind == "function_call":
            assert item.call is not None
            done = call_item(item.item_id, item.call.id, item.call.name, text, "completed")
            events.append(
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item.item_id,
                    output_index=item.output_index,
                    name=item.call.name,
                    arguments=text,
                )
            )
        else:
            reasoning = item.kind == "reasoning"
            part = {"type": "reasoning_text", "text": text} if reasoning else text_part(text)
            done_type = "response.reasoning_text.done" if reasoning else "response.output_text.done"
            extra: dict[str, Any] = {} if reasoning else {"logprobs": []}
            events.append(
                self._event(
                    done_type,
                    item_id=item.item_id,
                    output_index=item.output_index,
                    content_index=0,
                    text=text,
                    **extra,
                )
            )
            events.append(
                self._event(
                    "response.content_part.done",
                    item_id=item.item_id,
                    output_index=item.output_index,
                    content_index=0,
                    part=part,
                )
            )
            done = (
                reasoning_item(item.item_id, text, status)
                if reasoning
                else message_item(item.item_id, text, status)
            )
        events.append(
            self._event("response.output_item.done", output_index=item.output_index, item=done)
        )
        self.items.append(done)
        return events

    def finish(self, finish_reason: str, usage: Usage) -> list[dict[str, Any]]:
        incomplete = finish_reason == "length"
        events: list[dict[str, Any]] = self.start()
        if not self.items and self.open is None:
            events += self._ensure("message")  # an empty answer is still one (empty) message
        events += self._close("incomplete" if incomplete else "completed")
        status = "incomplete" if incomplete else "completed"
        reasoning = "".join(self.reasoning)
        reasoning_tokens = self.count_tokens(reasoning) if reasoning and self.count_tokens else 0
        response = response_object(
            self.envelope,
            status,
            self.items,
            usage,
            incomplete=incomplete,
            reasoning_tokens=reasoning_tokens,
        )
        kind = "response.incomplete" if incomplete else "response.completed"
        return [*events, self._event(kind, response=response)]

    def fail(self, message: str, code: str) -> list[dict[str, Any]]:
        events = self.start()
        self.open = None
        response = response_object(
            self.envelope, "failed", self.items, error={"code": code, "message": message}
        )
        return [*events, self._event("response.failed", response=response)]
