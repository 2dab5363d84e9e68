"""Build OpenAI response bodies: unary responses, stream chunks, usage, errors, SSE frames.

One `ResponseBuilder` per request keeps the `id`, `created` and `model` that every chunk of a
stream must repeat. Shapes follow OpenAI's published schemas (CreateChatCompletionResponse,
CreateChatCompletionStreamResponse, CreateCompletionResponse, ErrorResponse); a test validates
them against the spec.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servables.llm.choices import TokenLogprob, Usage
from servables.llm.output_parsers import ToolCall, ToolCallDelta
from servables.llm.request import Endpoint

SSE_DONE = b"data: [DONE]\n\n"


@dataclass
class Choice:
    """A finished choice of a unary response."""

    index: int
    text: str | None  # None: no content (a reply made only of tool calls)
    finish_reason: str
    logprobs: list[TokenLogprob] | None = None
    reasoning: str | None = None
    tool_calls: Sequence[ToolCall] = ()


def dumps(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def sse_frame(body: Any) -> bytes:
    return b"data: " + dumps(body).encode() + b"\n\n"


def error_body(
    message: str,
    error_type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def tool_call_entry(call: ToolCall) -> dict[str, Any]:
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def tool_call_delta_entry(call: ToolCallDelta) -> dict[str, Any]:
    """One `delta.tool_calls` item: id, type and name only on the call's first delta."""
    entry: dict[str, Any] = {"index": call.index}
    if call.id is not None:
        entry["id"] = call.id
        entry["type"] = "function"
    function: dict[str, Any] = {"arguments": call.arguments}
    if call.name is not None:
        function["name"] = call.name
    entry["function"] = function
    return entry


def _token_entry(item: TokenLogprob, top: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "token": item.token,
        "logprob": item.logprob,
        "bytes": list(item.token.encode()),
    }
    # openvino-genai returns only the chosen token's logprob; the spec allows fewer entries than
    # requested, so the chosen token is the one alternative we can list truthfully.
    entry["top_logprobs"] = (
        [{"token": item.token, "logprob": item.logprob, "bytes": entry["bytes"]}] if top else []
    )
    return entry


def chat_logprobs(items: Sequence[TokenLogprob], top: int) -> dict[str, Any]:
    return {"content": [_token_entry(item, top) for item in items], "refusal": None}


def completion_logprobs(items: Sequence[TokenLogprob], text_offset: int) -> dict[str, Any]:
    offsets = []
    for item in items:
        offsets.append(text_offset)
        text_offset += len(item.token)
    return {
        "tokens": [item.token for item in items],
        "token_logprobs": [item.logprob for item in items],
        # The schema wants a list; with only the chosen token's logprob, that is what each holds
        # (null for an echoed first token, as OpenAI's API and vLLM answer).
        "top_logprobs": [
            None if item.logprob is None else {item.token: item.logprob} for item in items
        ],
        "text_offset": offsets,
    }


class ResponseBuilder:
    """Bodies of one response; see the module docstring."""

    def __init__(
        self, endpoint: Endpoint, model: str, *, include_usage: bool = False, top_logprobs: int = 0
    ) -> None:
        self.endpoint = endpoint
        self.model = model
        self.id = ("chatcmpl-" if endpoint == "chat" else "cmpl-") + secrets.token_hex(12)
        self.created = int(time.time())
        self.include_usage = include_usage
        self.top_logprobs = top_logprobs
        self._text_offsets: dict[int, int] = {}

    def _envelope(self, choices: list[dict[str, Any]], chunk: bool) -> dict[str, Any]:
        if self.endpoint == "chat":
            kind = "chat.completion.chunk" if chunk else "chat.completion"
        else:
            kind = "text_completion"
        body: dict[str, Any] = {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if chunk and self.include_usage:
            body["usage"] = None
        return body

    def role_chunk(self, index: int) -> dict[str, Any]:
        """The first chat chunk of a choice: announces the assistant role."""
        return self._envelope(
            [
                {
                    "index": index,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            chunk=True,
        )

    def delta_chunk(
        self,
        index: int,
        text: str,
        logprobs: Sequence[TokenLogprob] | None = None,
        finish_reason: str | None = None,
        *,
        prefix: str = "",
        prefix_scored: bool = False,
        reasoning: str = "",
        tool_calls: Sequence[ToolCallDelta] = (),
    ) -> dict[str, Any]:
        """One chunk of choice `index`; `prefix` (echoed prompt) goes before `text`, and
        `logprobs` start with its tokens' when `prefix_scored` (echo with logprobs).

        Chat deltas may also carry `reasoning_content` (vLLM's and OVMS's name) and
        `tool_calls` fragments.
        """
        if self.endpoint == "chat":
            delta: dict[str, Any] = {}
            if reasoning:
                delta["reasoning_content"] = reasoning
            if text:
                delta["content"] = text
            if tool_calls:
                delta["tool_calls"] = [tool_call_delta_entry(call) for call in tool_calls]
            choice: dict[str, Any] = {
                "index": index,
                "delta": delta,
                "logprobs": chat_logprobs(logprobs, self.top_logprobs) if logprobs else None,
                "finish_reason": finish_reason,
            }
        else:
            start = self._text_offsets.get(index, 0)
            scored_from = start if prefix_scored else start + len(prefix)
            choice = {
                "index": index,
                "text": prefix + text,
                "logprobs": completion_logprobs(logprobs, scored_from) if logprobs else None,
                "finish_reason": finish_reason,
            }
            self._text_offsets[index] = start + len(prefix) + len(text)
        return self._envelope([choice], chunk=True)

    def usage_chunk(self, usage: Usage) -> dict[str, Any]:
        body = self._envelope([], chunk=True)
        body["usage"] = usage.as_dict()
        return body

    def unary(
        self,
        choices: Sequence[Choice],
        usage: Usage,
        prompt_text: str = "",
        prompt_scored: bool = False,
    ) -> dict[str, Any]:
        """The whole response; `prompt_text` is the echoed prompt, whose tokens' logprobs start
        each choice's when `prompt_scored`."""
        bodies: list[dict[str, Any]] = []
        for choice in choices:
            if self.endpoint == "chat":
                message: dict[str, Any] = {
                    "role": "assistant",
                    "content": choice.text,
                    "refusal": None,
                }
                if choice.reasoning is not None:
                    message["reasoning_content"] = choice.reasoning
                if choice.tool_calls:
                    message["tool_calls"] = [tool_call_entry(call) for call in choice.tool_calls]
                bodies.append(
                    {
                        "index": choice.index,
                        "message": message,
                        "logprobs": chat_logprobs(choice.logprobs, self.top_logprobs)
                        if choice.logprobs is not None
                        else None,
                        "finish_reason": choice.finish_reason,
                    }
                )
            else:
                bodies.append(
                    {
                        "index": choice.index,
                        "text": prompt_text + (choice.text or ""),
                        "logprobs": completion_logprobs(
                            choice.logprobs, 0 if prompt_scored else len(prompt_text)
                        )
                        if choice.logprobs is not None
                        else None,
                        "finish_reason": choice.finish_reason,
                    }
                )
        body = self._envelope(bodies, chunk=False)
        body["usage"] = usage.as_dict()
        return body
