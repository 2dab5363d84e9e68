"""Parser families by OVMS's names: validation at load time, one parser per generated sequence.

Names and the pair rule follow OVMS (src/llm/io_processing/parser_config_validation.cpp and
output_parser.cpp): a tool parser and a reasoning parser can be combined only if they agree on
whether the text must keep special tokens, since one detokenizer feeds both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from servables.llm.output_parsers._stage import ToolStage
from servables.llm.output_parsers.base import OutputParser
from servables.llm.output_parsers.chain import ChainedParser, ReasoningStage
from servables.llm.output_parsers.families import (
    GEMMA4_SPECIAL,
    LFM2_SPECIAL,
    MINICPM5_SPECIAL,
    TOOL_FAMILIES,
)
from servables.llm.output_parsers.harmony import HarmonyParser
from servables.llm.output_parsers.onyx import ONYX_SPECIAL, OnyxTurnStage
from servables.llm.output_parsers.reasoning import ThinkStage
from servables.llm.output_parsers.types import ParserConfigError

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "make_output_parser",
    "validate_parser_names",
]

TOOL_PARSERS: tuple[str, ...] = (*TOOL_FAMILIES, "gptoss")
"""Tool-call families graphrt implements (OVMS's names)."""

REASONING_PARSERS: tuple[str, ...] = ("qwen3", "lfm2", "gemma4", "onyx", "gptoss", "minicpm5")
"""Reasoning families graphrt implements (OVMS's names): all of OVMS's."""

# OVMS's pair rule compares what each parser needs from the detokenizer
# (requiresStreamingWithSpecialTokens); these are the ones that need special tokens kept.
_OVMS_SPECIAL_TOKEN_PARSERS = frozenset(
    {"devstral", "gptoss", "lfm2", "gemma4", "onyx", "minicpm5"}
)
# Reasoning blocks written with special tokens: (open tag, close tag, what else to drop).
_SPECIAL_REASONING: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "lfm2": ("<think>", "</think>", LFM2_SPECIAL),
    "gemma4": ("<|channel>thought", "<channel|>", GEMMA4_SPECIAL),
    "minicpm5": ("<think>", "</think>", MINICPM5_SPECIAL),
}


def validate_parser_names(tool_parser: str | None, reasoning_parser: str | None) -> None:
    """Raise ParserConfigError for an unknown name or a pair that cannot be combined.

    Call at load time with the resolved names (None = off; the integration maps OVMS's "" =
    auto-detect and "none" = off before calling).

    Pairs follow OVMS's rule, so that configurations move between the two servers unchanged:
    the parsers must agree on keeping special tokens (those of _OVMS_SPECIAL_TOKEN_PARSERS
    need them, the others not), which pairs gptoss only with gptoss.
    """
    _check_name("tool_parser", tool_parser, TOOL_PARSERS)
    _check_name("reasoning_parser", reasoning_parser, REASONING_PARSERS)
    if tool_parser is None or reasoning_parser is None:
        return
    tool_needs = tool_parser in _OVMS_SPECIAL_TOKEN_PARSERS
    if tool_needs != (reasoning_parser in _OVMS_SPECIAL_TOKEN_PARSERS):
        raise ParserConfigError(
            f"tool_parser {tool_parser!r} cannot be combined with reasoning_parser "
            f"{reasoning_parser!r}: one needs the output with special tokens kept and the "
            "other without (gptoss goes only with gptoss)"
        )


def _check_name(option: str, name: str | None, supported: tuple[str, ...]) -> None:
    if name is None or name in supported:
        return
    choices = ", ".join(supported)
    raise ParserConfigError(
        f"unknown {option} {name!r}; supported: {choices} (or 'none')", param=option
    )


def tool_schemas(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    """Tool name -> parameters schema, from Chat Completions or Responses tool definitions."""
    schemas: dict[str, Mapping[str, Any]] = {}
    for tool in tools or ():
        function = tool.get("function")
        definition = function if isinstance(function, Mapping) else tool
        name = definition.get("name")
        if isinstance(name, str):
            parameters = definition.get("parameters")
            schemas[name] = parameters if isinstance(parameters, Mapping) else {}
    return schemas


def make_output_parser(
    tool_parser: str | None,
    reasoning_parser: str | None,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    starts_in_reasoning: bool = False,
) -> OutputParser | None:
    """A fresh parser for one generated sequence, or None when there is nothing to parse.

    None when both names are None, and when tool parsing is off (no `tools`) and there is no
    reasoning parser: the text is then plain content, decoded as usual.

    `tools` are the request's tool definitions, in the Chat Completions form
    (`{"type": "function", "function": {"name", "parameters"}}`) or the Responses API's flat
    form (`{"type": "function", "name", "parameters"}`). None or empty turns tool-call parsing
    off (content passes through; reasoning is still split out), as OVMS does when a request has
    no tools. Families that convert argument values by type (qwen3coder) read the schemas here.

    `starts_in_reasoning`: the rendered prompt already opened the reasoning block
    (see prompt_opens_reasoning), so the output begins inside it.

    Read `keep_special_tokens` from the parser returned: it depends on the request (a family
    whose markers are special tokens does not need them when tool parsing is off).
    """
    validate_parser_names(tool_parser, reasoning_parser)
    tools_on = bool(tools) and tool_parser is not None
    if tool_parser == "gptoss" or reasoning_parser == "gptoss":
        return HarmonyParser(tools=tools_on, reasoning=reasoning_parser == "gptoss")
    if not tools_on and reasoning_parser is None:
        return None
    family = TOOL_FAMILIES[tool_parser] if tools_on and tool_parser is not None else None
    open_tag, close_tag, dropped = _SPECIAL_REASONING.get(reasoning_parser or "", ("", "", ()))
    think: ReasoningStage | None = None
    if reasoning_parser == "onyx":
        think, dropped = OnyxTurnStage(), ONYX_SPECIAL
    elif reasoning_parser:
        think = ThinkStage(
            starts_in_reasoning=starts_in_reasoning,
            open_tag=open_tag or "<think>",
            close_tag=close_tag or "</think>",
        )
    if family is None and dropped:
        # The block's tags are special tokens: the text keeps them, and the family's other
        # special tokens are dropped as its tool stage drops them (no call read without tools).
        return ChainedParser(think, ToolStage((), dropped, {}), keep_special_tokens=True)
    return ChainedParser(
        think,
        family.stage(tool_schemas(tools)) if family else None,
        keep_special_tokens=family.keep_special_tokens if family else False,
    )
