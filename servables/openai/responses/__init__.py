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

This module is the API's one import point; the work is split by job: responses_request.py
(request → chat request), responses_output.py (Response object and output items) and
responses_stream.py (the streamed event sequence).
"""

from __future__ import annotations

from servables.openai.responses.output import (
    ResponseEnvelope,
    response_object,
    sse_event,
    unary_output,
    usage_body,
)
from servables.openai.responses.request import ResponsesRequest, parse_responses_request
from servables.openai.responses.stream import ResponsesStream

__all__ = [
    "ResponseEnvelope",
    "ResponsesRequest",
    "ResponsesStream",
    "parse_responses_request",
    "response_object",
    "sse_event",
    "unary_output",
    "usage_body",
]
