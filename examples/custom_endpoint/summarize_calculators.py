"""Two small nodes that turn an LLM node into an endpoint of your own: POST /v3/summarize.

    {"model": "summarizer", "text": "...", "stream": false}
      → {"summary": "...", "usage": {...}}
    {"model": "summarizer", "text": "...", "stream": true}
      → data: {"type": "summary.delta", "delta": "..."} ... data: {"type": "summary.done", ...}

`SummaryRequestCalculator` turns the request into a chat request for the LLM node after it (OVMS's
unchanged HttpLLMCalculator); `SummaryReplyCalculator` turns the LLM's answer, as it streams,
into this endpoint's own replies. Nothing else is needed: the server sends any POST under /v3/
that no built-in route claims to the graph its body names.
"""

from __future__ import annotations

import dataclasses
import json

from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import JsonReply, Reply, SseEvent, SseEvents
from calculators.llm.answer import ChatChunk
from graphruntime import Calculator, CalculatorContext, Input, Output, calculator_function
from servables.errors import InvalidRequest

INSTRUCTION = "Summarize the user's text in one short sentence."


@calculator_function(inputs=["HTTP_REQUEST_PAYLOAD"], outputs=["HTTP_REQUEST_PAYLOAD"])
def SummaryRequestCalculator(payload: HttpPayload) -> HttpPayload:
    """{"text", "max_tokens"?, "stream"?} → the chat request the LLM node answers."""
    body = request_body(payload)
    text = body.get("text") if isinstance(body, dict) else None
    if not isinstance(text, str) or not text.strip():
        raise InvalidRequest("text must be a non-empty string", param="text")
    chat = {
        "model": body["model"],
        "messages": [
            {"role": "system", "content": INSTRUCTION},
            {"role": "user", "content": text},
        ],
        "max_tokens": body.get("max_tokens", 60),
        "temperature": 0,
        "stream": body.get("stream") is True,
    }
    return dataclasses.replace(
        payload, uri="/v3/chat/completions", parsed_json=chat, body=json.dumps(chat).encode()
    )


class SummaryReplyCalculator(Calculator):
    """The LLM's chat answer → {"summary"} (unary), or summary.delta / summary.done events."""

    answer = Input("CHUNK", object)
    reply = Output("HTTP_RESPONSE_PAYLOAD", object)
    blocking = False

    def open(self, cc: CalculatorContext) -> None:
        self.summary = ""

    def process(self, cc: CalculatorContext) -> None:
        chunk = ChatChunk.read(cc.inputs[self.answer].payload)
        cc.outputs[self.reply].add(self.translate(chunk))

    def translate(self, chunk: ChatChunk) -> Reply:
        if chunk.body is not None:  # a unary answer
            return JsonReply({"summary": chunk.text(), "usage": chunk.body.get("usage")})
        events: list[SseEvent] = []
        for event in chunk.events:
            if "error" in event:  # the LLM failed mid-stream: pass its error on
                events.append(SseEvent(event))
        delta = chunk.text()
        if delta:
            self.summary += delta
            events.append(SseEvent({"type": "summary.delta", "delta": delta}))
        if chunk.done and not chunk.failed:
            events.append(SseEvent({"type": "summary.done", "summary": self.summary}))
        return SseEvents(tuple(events))
