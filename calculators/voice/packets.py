"""What the voice chat nodes pass each other: text to speak, spoken text, chat response chunks.

The answer of an LLM node arrives as the bytes it sends its client (one JSON body, or SSE
frames); `ChatChunk` reads them once, for the nodes that need the text (the sentence splitter)
or the frames (the audio reply). The packet types are plain values, so a user's node can sit
between any two of them (a translation step, a filter) in graph.pbtxt alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from calculators.llm.payload import HttpReply
from servables.openai.audio_chat import AudioReply
from servables.text_to_speech.servable import DEFAULT_VOICE

SSE_DONE = b"data: [DONE]"


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
    """A SentenceBatch spoken: one entry per sentence, in order; `final` passed on; `voice`:
    who spoke (a voice's name, or "default": the model's own speaker)."""

    sentences: list[SentenceAudio]
    final: bool
    voice: str = DEFAULT_VOICE


@dataclass
class ChatChunk:
    """One response packet of a chat LLM node: its SSE events, or its unary JSON body."""

    events: list[dict[str, Any]] = field(default_factory=list)
    body: dict[str, Any] | None = None  # a unary answer
    done: bool = False  # `data: [DONE]` (or the unary body): nothing more will come

    @classmethod
    def read(cls, payload: bytes | HttpReply) -> ChatChunk:
        data = payload.body if isinstance(payload, HttpReply) else payload
        if data.lstrip().startswith(b"{"):
            parsed = json.loads(data)
            return cls(body=parsed if isinstance(parsed, dict) else None, done=True)
        chunk = cls()  # SSE frames (also `event:` lines, as a Responses stream has): data lines
        for line in data.split(b"\n"):
            line = line.strip()
            if line == SSE_DONE:
                chunk.done = True
            elif line.startswith(b"data:"):
                try:
                    event = json.loads(line[len(b"data:") :])
                except ValueError:
                    continue  # not an event of a chat stream
                if isinstance(event, dict):
                    chunk.events.append(event)
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
