"""What the voice chat nodes pass each other: text to speak, and spoken text.

The LLM's answer itself arrives as its replies, read with calculators.llm.answer.ChatChunk. The
packet types are plain values, so a user's node can sit between any two of them (a translation
step, a filter) in graph.pbtxt alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from servables.openai.audio_chat import AudioReply
from servables.text_to_speech.servable import DEFAULT_VOICE


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
