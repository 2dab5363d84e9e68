"""Responses API output: the Response object, its output items, and the SSE frame of an event.

A finished generation's single choice becomes output items: a `reasoning` item, a `message` with
one `output_text` part, and one `function_call` item per tool call. The item builders are shared
by the unary answer (here) and the event stream (responses_stream.py), so they live in a module
of their own, apart from request parsing (responses_request.py).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from servables.llm.choices import Usage
from servables.llm.output_parsers import ParsedOutput
from servables.openai.bodies import dumps

__all__ = [
    "ResponseEnvelope",
    "call_item",
    "message_item",
    "new_id",
    "reasoning_item",
    "response_object",
    "sse_event",
    "text_part",
    "unary_output",
    "usage_body",
]


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def usage_body(usage: Usage | None, reasoning_tokens: int = 0) -> dict[str, Any] | None:
    """The Response's usage; `reasoning_tokens` is the part of the output that was reasoning."""
    if usage is None:
        return None
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {
            "reasoning_tokens": max(0, min(reasoning_tokens, usage.completion_tokens))
        },
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


@dataclass
class ResponseEnvelope:
    """The Response object's fixed part: id, model, creation time and the echoed request."""

    model: str
    echo: dict[str, Any]
    id: str = field(default_factory=lambda: new_id("resp_"))
    created_at: int = field(default_factory=lambda: int(time.time()))


def response_object(
    envelope: ResponseEnvelope,
    status: str,
    output: Sequence[dict[str, Any]],
    usage: Usage | None = None,
    *,
    incomplete: bool = False,
    error: dict[str, str] | None = None,
    reasoning_tokens: int = 0,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": envelope.id,
        "object": "response",
        "created_at": envelope.created_at,
        "status": status,
        "completed_at": int(time.time()) if status == "completed" else None,
        "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "model": envelope.model,
        "output": list(output),
        **envelope.echo,
    }
    body["usage"] = usage_body(usage, reasoning_tokens)
    if body["usage"] is None:
        del body["usage"]
    return body


def message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [text_part(text)] if status != "in_progress" else [],
    }


def text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if status != "in_progress" else []
    return {"type": "reasoning", "id": item_id, "summary": [], "content": content, "status": status}


def call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
        "status": status,
    }


def unary_output(parsed: ParsedOutput, incomplete: bool) -> list[dict[str, Any]]:
    """Output items of a finished generation: reasoning, then the message, then the calls."""
    status = "incomplete" if incomplete else "completed"
    items: list[dict[str, Any]] = []
    if parsed.reasoning:
        items.append(reasoning_item(new_id("rs_"), parsed.reasoning, status))
    if parsed.content or not parsed.tool_calls:
        items.append(message_item(new_id("msg_"), parsed.content or "", status))
    for call in parsed.tool_calls:
        items.append(call_item(new_id("fc_"), call.id, call.name, call.arguments, "completed"))
    return items


def sse_event(event: dict[str, Any]) -> bytes:
    """One Responses event: OpenAI names the event on an `event:` line and repeats it in data."""
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()
