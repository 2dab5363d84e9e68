"""Text cut into sentences: what is spoken in one text-to-speech call, whole or as it streams.

A sentence ends at `.`, `!`, `?`, `;` or `:` followed by white space, at Chinese and Japanese
full stops (no space follows them), and at a line break. A sentence longer than a model reads at
once is cut again after a comma or a space (SpeechT5 reads 600 characters; longer fails inside
OpenVINO). `SentenceBuffer` does the same on text that arrives in pieces (an LLM's stream): a
sentence is complete once the white space after its end has arrived, so "3.5" is never cut.
"""

from __future__ import annotations

import re

# Characters spoken in one pipeline call at most (SpeechT5's 600 positions are characters).
MAX_PIECE = 400
_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+|(?<=[\u3002\uff01\uff1f])\s*|\n+")


def _fit(piece: str, longest: int) -> list[str]:
    """`piece` cut after a comma or a space until no part is longer than `longest`."""
    parts = []
    while len(piece) > longest:
        cut = max(piece.rfind(", ", 0, longest), piece.rfind(" ", 0, longest))
        cut = cut + 1 if cut > 0 else longest
        parts.append(piece[:cut].strip())
        piece = piece[cut:].strip()
    parts.append(piece)
    return [part for part in parts if part]


def _pieces(text: str, longest: int) -> list[str]:
    return [part for piece in _SENTENCE_END.split(text) for part in _fit(piece.strip(), longest)]


def sentences(text: str, longest: int = MAX_PIECE) -> list[str]:
    """`text` cut after each sentence (the pieces keep their words; empty ones dropped)."""
    return _pieces(text, longest) or [text]


class SentenceBuffer:
    """Sentences out of text that arrives in pieces; see the module docstring."""

    def __init__(self, longest: int = MAX_PIECE) -> None:
        self.longest = longest
        self._pending = ""

    def feed(self, text: str) -> list[str]:
        """The sentences `text` completes (none until a sentence's end and what follows it
        have arrived)."""
        self._pending += text
        ends = list(_SENTENCE_END.finditer(self._pending))
        if not ends:
            if len(self._pending) <= self.longest:
                return []
            *complete, self._pending = _fit(self._pending, self.longest) or [""]
            return complete
        done, self._pending = self._pending[: ends[-1].start()], self._pending[ends[-1].end() :]
        return [
            part
            for piece in _SENTENCE_END.split(done)
            for part in _fit(piece.strip(), self.longest)
        ]

    def flush(self) -> list[str]:
        """What is left: the last sentence, which no end followed."""
        pending, self._pending = self._pending, ""
        return _fit(pending.strip(), self.longest)
