"""Calculators that sit in front of the LLM: a prompt guard and a RAG-style context injector.

Both take the OpenAI request (the HTTP_REQUEST_PAYLOAD packet) and pass it on, so the LLM node
after them is OVMS's unchanged. The guard refuses requests that mention a blocked topic with an
OpenAI-style 400 error; the injector adds a system message with facts from a small local
knowledge base whose keywords appear in the user's last message.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from calculators.http.payload import HttpPayload
from graphruntime import Calculator, CalculatorContext, Input, Output
from servables.errors import InvalidRequest

HERE = Path(__file__).parent
BLOCKED = [line.strip().lower() for line in (HERE / "blocked_topics.txt").read_text().splitlines()]
FACTS: dict[str, str] = json.loads((HERE / "facts.json").read_text())


def last_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return str(body.get("prompt", ""))


class PromptGuardCalculator(Calculator):
    request = Input("HTTP_REQUEST_PAYLOAD", HttpPayload)
    checked = Output("HTTP_REQUEST_PAYLOAD", HttpPayload)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        payload = cc.inputs[self.request].payload
        text = last_user_text(payload.parsed_json or {}).lower()
        for topic in filter(None, BLOCKED):
            if topic in text:
                raise InvalidRequest(f"This assistant does not discuss {topic}.", code="blocked")
        cc.outputs[self.checked].add(payload)


class ContextInjectorCalculator(Calculator):
    request = Input("HTTP_REQUEST_PAYLOAD", HttpPayload)
    augmented = Output("HTTP_REQUEST_PAYLOAD", HttpPayload)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        payload = cc.inputs[self.request].payload
        body = dict(payload.parsed_json or {})
        text = last_user_text(body).lower()
        facts = [fact for keyword, fact in FACTS.items() if keyword in text]
        if facts and isinstance(body.get("messages"), list):
            context = {"role": "system", "content": "Use these facts: " + " ".join(facts)}
            body["messages"] = [context, *body["messages"]]
            payload = dataclasses.replace(payload, parsed_json=body, body=json.dumps(body).encode())
        cc.outputs[self.augmented].add(payload)
