"""Tool-call and reasoning output parsers for the model families OVMS supports.

Pure Python and engine-agnostic: text in, OpenAI-shaped content / reasoning / tool calls out,
unary (`OutputParser.parse`) or streaming (`feed` / `finish`). `make_output_parser` builds one
per generated sequence from OVMS's parser names; `detect_parsers` picks the names from a chat
template; `tool_call_structural_tag` gives the grammar that makes the engine emit a call in the
family's format.
"""

from servables.llm.output_parsers.base import OutputParser
from servables.llm.output_parsers.detection import detect_parsers, prompt_opens_reasoning
from servables.llm.output_parsers.grammar import tool_call_structural_tag
from servables.llm.output_parsers.registry import (
    REASONING_PARSERS,
    TOOL_PARSERS,
    make_output_parser,
    validate_parser_names,
)
from servables.llm.output_parsers.types import (
    ParsedDelta,
    ParsedOutput,
    ParserConfigError,
    ToolCall,
    ToolCallDelta,
)

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "OutputParser",
    "ParsedDelta",
    "ParsedOutput",
    "ParserConfigError",
    "ToolCall",
    "ToolCallDelta",
    "detect_parsers",
    "make_output_parser",
    "prompt_opens_reasoning",
    "tool_call_structural_tag",
    "validate_parser_names",
]
