"""Responses API requests (`POST /v3/responses`) as the chat requests they amount to.

`input` items become chat messages, `instructions` a system message, `max_output_tokens` the
completion limit, `text.format` the response format and `reasoning.effort` the template's
`enable_thinking`; the result is validated by the chat rules (`protocol.parse_request`). The
request fields the Response object repeats are gathered here too. Its own module because parsing
a request shares nothing with building the output (responses_output.py, responses_stream.py).

No state is kept between requests: `store` is accepted and nothing is stored, and
`previous_response_id` / `conversation` are refused (the client sends the whole conversation
in `input`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servables.errors import InvalidRequest
from servables.llm.request import GenerationRequest, Limits
from servables.openai.protocol import parse_request

__all__ = ["PASSED_THROUGH", "UNSUPPORTED", "ResponsesRequest", "parse_responses_request"]

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
