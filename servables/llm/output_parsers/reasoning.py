"""`<think>...</think>` reasoning (Qwen3, QwQ, DeepSeek-R1 and their distills; OVMS's `qwen3`).

The block counts only at the very start of the output: a `<think>` later in the answer is the
model talking about tags, not reasoning. A prompt that already opened the block (thinking
templates end the generation prompt with "<think>\\n") makes the output start inside it; an
opening tag the model repeats anyway is dropped. Generation that stops inside the block (length
limit) leaves its text in reasoning, where it belongs, not in content. Whitespace that only lays
out the tags (after `<think>`, before and after `</think>`) is dropped.
"""

from __future__ import annotations

import enum

from servables.llm.output_parsers._markers import partial_marker_length

__all__ = ["ThinkStage"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"
_WHITESPACE = " \t\n\r"


class _Phase(enum.Enum):
    START = enum.auto()  # nothing but whitespace yet: a block may open
    OPENING = enum.auto()  # inside a block the prompt opened: the model may still repeat <think>
    REASONING = enum.auto()
    CONTENT = enum.auto()


class ThinkStage:
    """Splits text into (reasoning, content) pieces; one per generated sequence."""

    def __init__(
        self,
        *,
        starts_in_reasoning: bool = False,
        open_tag: str = OPEN_TAG,
        close_tag: str = CLOSE_TAG,
    ) -> None:
        """`open_tag`/`close_tag`: another family's block (Gemma 4: `<|channel>thought` and
        `<channel|>`)."""
        self._open, self._close = open_tag, close_tag
        self._phase = _Phase.OPENING if starts_in_reasoning else _Phase.START
        self._buffer = ""
        self._pending_space = ""
        self._strip_leading = False

    def feed(self, text: str) -> tuple[str, str]:
        self._buffer += text
        return self._run(final=False)

    def finish(self) -> tuple[str, str]:
        reasoning, content = self._run(final=True)
        if self._phase is _Phase.REASONING:
            reasoning += self._pending_space
        elif not self._strip_leading:
            content += self._pending_space
        self._pending_space = ""
        return reasoning, content

    def _run(self, *, final: bool) -> tuple[str, str]:
        reasoning = content = ""
        while True:
            phase = self._phase
            if phase in (_Phase.START, _Phase.OPENING):
                stripped = self._buffer.lstrip(_WHITESPACE)
                if stripped.startswith(self._open):
                    self._enter_reasoning(stripped[len(self._open) :])
                    continue
                if not final and self._open.startswith(stripped):
                    return reasoning, content
                if phase is _Phase.OPENING:
                    self._enter_reasoning(stripped)
                    continue
                self._phase = _Phase.CONTENT
                continue
            if phase is _Phase.REASONING:
                end = self._buffer.find(self._close)
                if end >= 0:
                    reasoning += self._trimmed(self._buffer[:end])
                    self._pending_space = ""
                    self._buffer = self._buffer[end + len(self._close) :]
                    self._phase = _Phase.CONTENT
                    self._strip_leading = True
                    continue
                keep = 0 if final else partial_marker_length(self._buffer, (self._close,))
                reasoning += self._trimmed(self._buffer[: len(self._buffer) - keep])
                self._buffer = self._buffer[len(self._buffer) - keep :]
                return reasoning, content
            # CONTENT: after </think>, leading whitespace is layout; otherwise pass through.
            if self._strip_leading:
                self._buffer = self._buffer.lstrip(_WHITESPACE)
                if not self._buffer:
                    return reasoning, content
                self._strip_leading = False
            content += self._buffer
            self._buffer = ""
            return reasoning, content

    def _enter_reasoning(self, rest: str) -> None:
        self._phase = _Phase.REASONING
        self._buffer = rest
        self._pending_space = ""
        self._strip_leading = True

    def _trimmed(self, text: str) -> str:
        """Reasoning text without the whitespace that lays out the tags (held until known)."""
        if self._strip_leading:
            text = text.lstrip(_WHITESPACE)
            if not text:
                return ""
            self._strip_leading = False
        text = self._pending_space + text
        released = text.rstrip(_WHITESPACE)
        self._pending_space = text[len(released) :]
        return released
