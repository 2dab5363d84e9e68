"""Choosing parsers from the chat template, and noticing a prompt that opens the reasoning block.

Detection looks for each family's markers in the template source, in OVMS's order
(src/llm/io_processing/chat_template/analyzer.cpp): the most specific markers first, since
several families share `<tool_call>` or `[TOOL_CALLS]`.
"""

from __future__ import annotations

__all__ = ["detect_parsers", "prompt_opens_reasoning"]


def detect_parsers(chat_template: str) -> tuple[str | None, str | None]:
    """(tool_parser, reasoning_parser) suited to a chat template; None where nothing matches.

    Families OVMS detects but graphrt does not implement yield None (the integration then
    serves the model without that parser, and should log it).
    """
    raise NotImplementedError


def prompt_opens_reasoning(rendered_prompt: str, reasoning_parser: str) -> bool:
    """True when the prompt ends inside an open reasoning block (e.g. "...<think>\\n").

    DeepSeek-R1 and Qwen3 thinking templates append the opening tag to the generation prompt,
    so the model writes only the reasoning body and the closing tag; pass the result as
    make_output_parser(starts_in_reasoning=...).
    """
    raise NotImplementedError
