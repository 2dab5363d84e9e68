"""The parser every family implements: one per generated sequence, text in, channels out."""

from __future__ import annotations

from abc import ABC, abstractmethod

from servables.llm.output_parsers.types import ParsedDelta, ParsedOutput, ToolCall

__all__ = ["OutputParser"]


class OutputParser(ABC):
    """Splits one generated sequence (one choice) into content, reasoning and tool calls.

    Feed it the detokenized text as it arrives, in pieces of any size: a marker may be cut
    anywhere, even inside a multi-character marker. Text that could still turn out to be the
    start of a marker is held back until it is clear, so markup never reaches `content` or
    `reasoning`. `finish()` flushes what was held. Not thread-safe; create one per choice (n>1
    needs n parsers).

    `keep_special_tokens`: when True, the family's markers are special tokens, so the text fed in
    must be decoded with `skip_special_tokens=False`; the parser then removes its family's other
    special tokens (end of turn, end of sequence) from the content itself.
    """

    keep_special_tokens: bool = False

    @abstractmethod
    def feed(self, text: str) -> ParsedDelta:
        """Take the next piece of generated text; return what can be released now."""

    @abstractmethod
    def finish(self) -> ParsedDelta:
        """Generation ended (any finish reason): release everything still held.

        Call it for every finish reason (stop, length, abort) before sending the last chunk.
        A call cut off after its name was reported is closed: its arguments are completed into
        valid JSON by appending (a cut string is closed, a half-written key dropped), so the
        streamed fragments stay valid. A body cut off before a call could be reported (no name
        yet, or a pythonic list, which is only reported whole) becomes content, markers
        included unless they are special tokens, so no generated text is lost. Text inside an
        unterminated reasoning block stays reasoning. Do not feed the parser afterwards.
        """

    def parse(self, text: str) -> ParsedOutput:
        """The unary result: the whole text fed at once, then finished, deltas assembled.

        Being built from the same deltas as streaming, it is by construction what a streaming
        client assembles; ids match the first deltas' ids.
        """
        return assemble([self.feed(text), self.finish()])


def extend_delta(target: ParsedDelta, more: ParsedDelta) -> None:
    """Append `more` to `target`, joining argument pieces of the same call."""
    target.content += more.content
    target.reasoning += more.reasoning
    for call in more.tool_calls:
        last = target.tool_calls[-1] if target.tool_calls else None
        if last is not None and last.index == call.index and call.id is None:
            last.arguments += call.arguments
        else:
            target.tool_calls.append(call)


def assemble(deltas: list[ParsedDelta]) -> ParsedOutput:
    """Join deltas the way an OpenAI client joins chunks."""
    content: list[str] = []
    reasoning: list[str] = []
    ids: dict[int, str] = {}
    names: dict[int, str] = {}
    arguments: dict[int, list[str]] = {}
    for delta in deltas:
        content.append(delta.content)
        reasoning.append(delta.reasoning)
        for call in delta.tool_calls:
            if call.id is not None:
                ids[call.index] = call.id
            if call.name is not None:
                names[call.index] = call.name
            arguments.setdefault(call.index, []).append(call.arguments)
    calls = [
        ToolCall(id=ids[index], name=names[index], arguments="".join(arguments[index]))
        for index in sorted(arguments)
    ]
    return ParsedOutput(
        content="".join(content) or None, reasoning="".join(reasoning) or None, tool_calls=calls
    )
