"""Parser families by OVMS's names: validation at load time, one parser per generated sequence.

Names and the pair rule follow OVMS (src/llm/io_processing/parser_config_validation.cpp and
output_parser.cpp): a tool parser and a reasoning parser can be combined only if they agree on
whether the text must keep special tokens, since one detokenizer feeds both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servables.llm.output_parsers.base import OutputParser

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "make_output_parser",
    "validate_parser_names",
]

TOOL_PARSERS: tuple[str, ...] = (
    "hermes3",
    "llama3",
    "mistral",
    "devstral",
    "phi4",
    "qwen3coder",
    "gptoss",
)
"""Tool-call families graphrt implements (a subset of OVMS's names)."""

REASONING_PARSERS: tuple[str, ...] = ("qwen3", "gptoss")
"""Reasoning families graphrt implements (a subset of OVMS's names)."""


def validate_parser_names(tool_parser: str | None, reasoning_parser: str | None) -> None:
    """Raise ParserConfigError for an unknown name or a pair that cannot be combined.

    Call at load time with the resolved names (None = off; the integration maps OVMS's "" =
    auto-detect and "none" = off before calling).
    """
    raise NotImplementedError


def make_output_parser(
    tool_parser: str | None,
    reasoning_parser: str | None,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    starts_in_reasoning: bool = False,
) -> OutputParser | None:
    """A fresh parser for one generated sequence, or None when both names are None.

    `tools` are the request's tool definitions, in the Chat Completions form
    (`{"type": "function", "function": {"name", "parameters"}}`) or the Responses API's flat
    form (`{"type": "function", "name", "parameters"}`). None or empty turns tool-call parsing
    off (content passes through; reasoning is still split out), as OVMS does when a request has
    no tools. Families that convert argument values by type (qwen3coder) read the schemas here.

    `starts_in_reasoning`: the rendered prompt already opened the reasoning block
    (see prompt_opens_reasoning), so the output begins inside it.
    """
    raise NotImplementedError
