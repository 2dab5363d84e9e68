"""A reasoning stage and a tool stage run one after the other on the same text.

Reasoning comes first, as in OVMS: the tool parser sees only what is left for content, so a
call the model merely considers inside `<think>` is not executed.
"""

from __future__ import annotations

from typing import Protocol

from servables.llm.output_parsers._stage import ToolStage
from servables.llm.output_parsers.base import OutputParser, extend_delta
from servables.llm.output_parsers.types import ParsedDelta

__all__ = ["ChainedParser"]


class ReasoningStage(Protocol):
    """Splits text into (reasoning, content): ThinkStage, OnyxTurnStage."""

    def feed(self, text: str) -> tuple[str, str]: ...

    def finish(self) -> tuple[str, str]: ...


class ChainedParser(OutputParser):
    def __init__(
        self,
        reasoning: ReasoningStage | None,
        tools: ToolStage | None,
        *,
        keep_special_tokens: bool,
    ) -> None:
        self._reasoning = reasoning
        self._tools = tools
        self.keep_special_tokens = keep_special_tokens

    def feed(self, text: str) -> ParsedDelta:
        reasoning, content = self._reasoning.feed(text) if self._reasoning else ("", text)
        delta = self._tools.feed(content) if self._tools else ParsedDelta(content=content)
        delta.reasoning = reasoning
        return delta

    def finish(self) -> ParsedDelta:
        reasoning, content = self._reasoning.finish() if self._reasoning else ("", "")
        if self._tools is None:
            return ParsedDelta(content=content, reasoning=reasoning)
        delta = self._tools.feed(content)
        extend_delta(delta, self._tools.finish())
        delta.reasoning = reasoning
        return delta
