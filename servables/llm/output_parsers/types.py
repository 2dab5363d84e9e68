"""The values output parsers produce, shaped after OpenAI's message and chunk fields.

A parser turns the model's raw text into three channels: `content` (what the user reads),
`reasoning` (`reasoning_content`) and tool calls. Streaming yields `ParsedDelta`s whose pieces
concatenate to the unary `ParsedOutput`, so a client that assembles chunks sees what a unary
client sees.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from servables.errors import ServableLoadError

__all__ = [
    "ParsedDelta",
    "ParsedOutput",
    "ParserConfigError",
    "ToolCall",
    "ToolCallDelta",
    "new_call_id",
]


class ParserConfigError(ServableLoadError):
    """`tool_parser` / `reasoning_parser` name an unknown family or a pair that cannot be combined.

    Raised when the servable loads (validate_parser_names) so that a typo in graph.pbtxt or on the
    command line fails the load with a message listing the valid names, instead of every request.
    """


def new_call_id() -> str:
    """An OpenAI-style tool call id: "call_" and 24 random alphanumerics (as vLLM makes them)."""
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    return "call_" + "".join(secrets.choice(alphabet) for _ in range(24))


@dataclass(frozen=True)
class ToolCall:
    """A finished call, as in `message.tool_calls[i]` of a unary response."""

    id: str
    """"call_" + random; the id its first streamed delta carried."""
    name: str
    arguments: str
    """JSON object text, always valid JSON; "{}" when the model gave no arguments."""


@dataclass
class ToolCallDelta:
    """One entry of a chunk's `delta.tool_calls`."""

    index: int
    """The call's position among this choice's tool calls (0, 1, ...)."""
    id: str | None = None
    """Only on the call's first delta."""
    name: str | None = None
    """Only on the call's first delta."""
    arguments: str = ""
    """The next piece of the arguments' JSON text; the pieces concatenate to ToolCall.arguments."""


@dataclass
class ParsedDelta:
    """What one `feed()` / `finish()` yields; empty when the parser is holding text back."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning or self.tool_calls)


@dataclass
class ParsedOutput:
    """A whole generation, parsed: `message.content`, `message.reasoning_content`, `tool_calls`.

    `content` / `reasoning` are None when the model produced none (OpenAI sends `content: null`
    with tool calls); they are never "".
    """

    content: str | None
    reasoning: str | None
    tool_calls: list[ToolCall]
