"""OpenAI's Responses API (`POST /v3/responses`) on top of the chat machinery.

A request is translated into a chat request (`input` items become messages, `instructions` a
system message, `max_output_tokens` the completion limit, `text.format` the response format,
`reasoning.effort` the template's `enable_thinking`) and validated by the same rules; the output
of the single choice becomes Response output items: a `reasoning` item, a `message` with one
`output_text` part, and one `function_call` item per tool call. Streaming follows OpenAI's event
sequence, every event numbered by `sequence_number`, and reasoning streams as
`response.reasoning_text.*` events (the events OpenAI sends for open-weight models' raw
reasoning, which the openai SDK parses).

No state is kept between requests: `store` is accepted and nothing is stored, and
`previous_response_id` / `conversation` are refused (the client sends the whole conversation
in `input`).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from servables.errors import InvalidRequest
from servables.llm.output_parsers import ParsedOutput, ToolCall, ToolCallDelta
from servables.openai.protocol import GenerationRequest, Limits, parse_request
from servables.openai.responses import Usage, dumps

__all__ = [
    "ResponsesRequest",
    "ResponsesStream",
    "parse_responses_request",
    "response_object",
    "unary_output",
]

# Chat/completions fields a Responses request may also carry (OVMS's extensions, vLLM's too).
PASSED_THROUGH = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "frequency_penalty",
    "presence_penalty",
    "seed",
    "stop",
    "ignore_eos",
    "include_stop_str_in_output",
    "skip_special_tokens",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "structured_outputs",
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
)
UNSUPPORTED = {
    "previous_response_id": "previous_response_id is not supported: graphrt keeps no response "
    "state (store is accepted but nothing is kept); send the whole conversation in input",
    "conversation": "conversation is not supported: graphrt keeps no conversation state; send "
    "the whole conversation in input",
}


@dataclass
class ResponsesRequest:
    generation: GenerationRequest
    echo: dict[str, Any]  # request fields the Response object repeats
    ignored_fields: list[str] = field(default_factory=list)


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


# ------------------------------------------------------------------------------------ request


def _content_parts(content: Any, where: str) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidRequest(f"{where}.content must be a string or an array", param=where)
    parts: list[dict[str, Any]] = []
    for position, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text")})
        elif kind == "input_image":
            url = part.get("image_url")
            if isinstance(url, dict):  # chat-style {"url": ...}
                url = url.get("url")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        else:
            raise InvalidRequest(
                f"Unsupported content type: {kind!r}", param=f"{where}.content[{position}]"
            )
    return parts


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """`instructions` and `input` as chat messages."""
    messages: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str):
            raise InvalidRequest("instructions must be a string", param="instructions")
        messages.append({"role": "system", "content": instructions})
    items = body.get("input")
    if items is None:
        raise InvalidRequest("input missing in request", param="input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    if not isinstance(items, list) or not items:
        raise InvalidRequest("input must be a string or a non-empty array", param="input")
    for index, item in enumerate(items):
        where = f"input[{index}]"
        if not isinstance(item, dict):
            raise InvalidRequest("input item is not a JSON object", param=where)
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "assistant", "system", "developer"):
                raise InvalidRequest(
                    "role must be user, assistant, system or developer", param=f"{where}.role"
                )
            # Chat templates know "system", rarely "developer" (OpenAI's newer name for it).
            content = _content_parts(item.get("content", ""), where)
            messages.append({"role": "system" if role == "developer" else role, "content": content})
        elif kind == "function_call":
            call = {
                "id": item.get("call_id"),
                "type": "function",
                "function": {"name": item.get("name"), "arguments": item.get("arguments", "{}")},
            }
            if not isinstance(call["id"], str) or not isinstance(item.get("name"), str):
                raise InvalidRequest("function_call items need call_id and name", param=where)
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and last.get("tool_calls"):
                last["tool_calls"].append(call)  # parallel calls: one assistant turn
            else:
                messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(item.get("call_id"), str):
                raise InvalidRequest("function_call_output items need call_id", param=where)
            if isinstance(output, list):
                output = "".join(part.get("text", "") for part in output if isinstance(part, dict))
            if not isinstance(output, str):
                raise InvalidRequest(
                    "function_call_output.output must be a string", param=f"{where}.output"
                )
            messages.append({"role": "tool", "tool_call_id": item["call_id"], "content": output})
        elif kind == "reasoning":
            continue  # the model's earlier reasoning: templates drop it from history anyway
        else:
            raise InvalidRequest(f"input item type {kind!r} is not supported", param=where)
    return messages


def _text_format(text: Any) -> dict[str, Any] | None:
    if text is None:
        return None
    if not isinstance(text, dict):
        raise InvalidRequest("text must be an object", param="text")
    form = text.get("format")
    if form is None:
        return None
    if not isinstance(form, dict):
        raise InvalidRequest("text.format must be an object", param="text.format")
    kind = form.get("type")
    if kind in ("text", "json_object"):
        return {"type": kind}
    if kind == "json_schema":
        spec = {key: form[key] for key in ("name", "schema", "strict") if key in form}
        if "schema" not in spec:
            raise InvalidRequest("text.format.schema is required", param="text.format.schema")
        return {"type": "json_schema", "json_schema": spec}
    raise InvalidRequest(
        "text.format.type must be 'text', 'json_object' or 'json_schema'", param="text.format.type"
    )


def parse_responses_request(body: Any, limits: Limits) -> ResponsesRequest:
    """Validate a Responses request; the chat request it amounts to, and what to echo."""
    if not isinstance(body, dict):
        raise InvalidRequest("JSON body must be an object")
    for name, message in UNSUPPORTED.items():
        if body.get(name) is not None:
            raise InvalidRequest(message, param=name)
    if body.get("background") is True:
        raise InvalidRequest("background responses are not supported", param="background")
    chat: dict[str, Any] = {
        "model": body.get("model"),
        "stream": body.get("stream", False),
        "messages": _messages(body),
    }
    for name in PASSED_THROUGH:
        if body.get(name) is not None:
            chat[name] = body[name]
    if body.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = body["max_output_tokens"]
    text_format = _text_format(body.get("text"))
    if text_format is not None:
        if "response_format" in chat:
            raise InvalidRequest(
                "text.format and response_format cannot both be given", param="text.format"
            )
        chat["response_format"] = text_format
    kwargs = body.get("chat_template_kwargs")
    kwargs = dict(kwargs) if isinstance(kwargs, dict) else kwargs
    reasoning = body.get("reasoning")
    if reasoning is not None:
        if not isinstance(reasoning, dict):
            raise InvalidRequest("reasoning must be an object", param="reasoning")
        effort = reasoning.get("effort")
        if effort is not None:
            kwargs = kwargs if isinstance(kwargs, dict) else {}
            kwargs.setdefault("enable_thinking", effort != "none")
    if kwargs is not None:
        chat["chat_template_kwargs"] = kwargs
    try:
        generation = parse_request(chat, "chat", limits)
    except InvalidRequest as error:
        if error.param == "max_completion_tokens":
            error.param = "max_output_tokens"
            error.message = error.message.replace("max_completion_tokens", "max_output_tokens")
            error.args = (error.message,)
        raise
    known = {
        *PASSED_THROUGH,
        "model",
        "stream",
        "input",
        "instructions",
        "max_output_tokens",
        "text",
        "reasoning",
        "chat_template_kwargs",
        "store",
        "metadata",
        "user",
        "truncation",
        "include",
        "service_tier",
        "background",
        "safety_identifier",
        "prompt_cache_key",
    }
    echo = {
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "parallel_tool_calls": generation.parallel_tool_calls,
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": _echo_tools(generation),
        "text": {"format": _echo_format(body.get("text"))},
        "reasoning": reasoning,
        "store": bool(body.get("store", False)),
        "metadata": body.get("metadata") or {},
        "truncation": "disabled",
        "previous_response_id": None,
    }
    return ResponsesRequest(generation, echo, sorted(set(body) - known))


def _echo_tools(request: GenerationRequest) -> list[dict[str, Any]]:
    """The tools in the Responses form (`FunctionTool`)."""
    tools = []
    for tool in request.tools or ():
        function = tool["function"]
        tools.append(
            {
                "type": "function",
                "name": function["name"],
                "description": function.get("description"),
                "parameters": function["parameters"],
                "strict": function.get("strict", True),
            }
        )
    return tools


def _echo_format(text: Any) -> dict[str, Any]:
    form = text.get("format") if isinstance(text, dict) else None
    return form if isinstance(form, dict) else {"type": "text"}


# ----------------------------------------------------------------------------------- response


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
    id: str = field(default_factory=lambda: _new_id("resp_"))
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


def _message_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [_text_part(text)] if status != "in_progress" else [],
    }


def _text_part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _reasoning_item(item_id: str, text: str, status: str) -> dict[str, Any]:
    content = [{"type": "reasoning_text", "text": text}] if status != "in_progress" else []
    return {"type": "reasoning", "id": item_id, "summary": [], "content": content, "status": status}


def _call_item(
    item_id: str, call_id: str, name: str, arguments: str, status: str
) -> dict[str, Any]:
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
        items.append(_reasoning_item(_new_id("rs_"), parsed.reasoning, status))
    if parsed.content or not parsed.tool_calls:
        items.append(_message_item(_new_id("msg_"), parsed.content or "", status))
    for call in parsed.tool_calls:
        items.append(_call_item(_new_id("fc_"), call.id, call.name, call.arguments, "completed"))
    return items


def sse_event(event: dict[str, Any]) -> bytes:
    """One Responses event: OpenAI names the event on an `event:` line and repeats it in data."""
    return f"event: {event['type']}\ndata: {dumps(event)}\n\n".encode()


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
        item = _OpenItem(kind, _new_id(prefix), len(self.items))
        self.open = item
        return item, events

    def _ensure(self, kind: str) -> list[dict[str, Any]]:
        """Open a reasoning or message item unless one of that kind is open."""
        events: list[dict[str, Any]] = []
        item = self.open
        if item is None or item.kind != kind:
            item, events = self._open(kind, "rs_" if kind == "reasoning" else "msg_")
            empty = (
                _reasoning_item(item.item_id, "", "in_progress")
                if kind == "reasoning"
                else _message_item(item.item_id, "", "in_progress")
            )
            part = {"type": "reasoning_text", "text": ""} if kind == "reasoning" else _text_part("")
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
            item.call = ToolCall(delta.id or _new_id("call_"), delta.name or "", "")
            item.call_index = delta.index
            self.calls[delta.index] = item
            events.append(
                self._event(
                    "response.output_item.added",
                    output_index=item.output_index,
                    item=_call_item(item.item_id, item.call.id, item.call.name, "", "in_progress"),
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
            done = _call_item(item.item_id, item.call.id, item.call.name, text, "completed")
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
            part = {"type": "reasoning_text", "text": text} if reasoning else _text_part(text)
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
                _reasoning_item(item.item_id, text, status)
                if reasoning
                else _message_item(item.item_id, text, status)
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
