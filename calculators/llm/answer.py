"""An LLM node's answer read back: what nodes after HttpLLMCalculator need of its replies.

The node answers with one JSON body (a unary request) or, step by step, a stream's events (bytes
from a graph written for OVMS); `ChatChunk` reads one reply for the nodes that need the text (a
sentence splitter, an endpoint of your own) or the events (the voice chat's audio reply).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from calculators.http.replies import HttpReply, JsonReply, Reply, events_of, json_of


@dataclass
class ChatChunk:
    """One response packet of a chat LLM node: its SSE events, or its unary JSON body."""

    events: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None  # a unary answer
    done: bool = False  # `data: [DONE]` (or the unary body): nothing more will come

    @classmethod
    def read(cls, reply: Reply) -> ChatChunk:
        if isinstance(reply, HttpReply):
            reply = reply.body
        if isinstance(reply, JsonReply) or (
            isinstance(reply, bytes) and reply.lstrip().startswith(b"{")
        ):
            body = json_of(reply)
            return cls(body=body if isinstance(body, dict) else None, done=True)
        chunk = cls()
        for event in events_of(reply).events:
            if event.done:
                chunk.done = True
            elif isinstance(event.data, dict):
                chunk.events.append(event.data)
        return chunk

    def text(self) -> str:
        """The answer's text in this chunk (the first choice's)."""
        if self.body is not None:
            choices = self.body.get("choices") or [{}]
            content = (choices[0].get("message") or {}).get("content")
            return content if isinstance(content, str) else ""
        pieces = []
        for event in self.events:
            for choice in event.get("choices") or []:
                delta = choice.get("delta") or {}
                if choice.get("index", 0) == 0 and isinstance(delta.get("content"), str):
                    pieces.append(delta["content"])
        return "".join(pieces)

    @property
    def failed(self) -> bool:
        """The stream ended with an error frame (the answer is cut short)."""
        return any("error" in event for event in self.events)
