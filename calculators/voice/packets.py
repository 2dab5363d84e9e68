"""What the voice chat nodes pass each other: text to speak, spoken text, chat response chunks.

The answer of an LLM node arrives as the replies it sends its client (one JSON body, or a stream
step's events; bytes from a graph written for OVMS); `ChatChunk` reads one, for the nodes that
need the text (the sentence splitter) or the events (the audio reply). The packet types are plain
values, so a user's node can sit between any two of them (a translation step, a filter) in
graph.pbtxt alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from calculators.http.replies import HttpReply, JsonReply, Reply, events_of, json_of
from servables.openai.audio_chat import AudioReply


@dataclass(frozen=True)
class SentenceBatch:
    """Complete sentences of the answer so far (maybe none); `final`: the answer has ended."""

    sentences: list[str]
    final: bool
    reply: AudioReply | None


@dataclass(frozen=True)
class SentenceAudio:
    text: str
    samples: npt.NDArray[np.float32]
    rate: int


@dataclass(frozen=True)
class SpokenBatch:
    """A SentenceBatch spoken: one entry per sentence, in order; `final` passed on."""

    sentences: list[SentenceAudio]
    final: bool


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
