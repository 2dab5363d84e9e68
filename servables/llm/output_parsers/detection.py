"""Choosing parsers from the chat template, and noticing a prompt that opens the reasoning block.

Detection looks for each family's markers in the template source, in OVMS's order
(src/llm/io_processing/chat_template/analyzer.cpp): the most specific markers first, since
several families share `<tool_call>` or `[TOOL_CALLS]`.
"""

from __future__ import annotations

from servables.llm.output_parsers.reasoning import OPEN_TAG

__all__ = ["detect_parsers", "prompt_opens_reasoning"]


def _has(template: str, *needles: str) -> bool:
    return all(needle in template for needle in needles)


def _thinks(template: str) -> bool:
    return "<think>" in template or "content.split('</think>')" in template


def _analyze(template: str) -> tuple[str | None, str | None]:
    """OVMS's ChatTemplateAnalyzer: (tool parser, reasoning parser) by OVMS's names."""
    if "<|channel|>" in template:
        return "gptoss", "gptoss"
    if _has(template, "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"):
        return "onyx", "onyx"
    if "<|tool_call>call:" in template:
        return "gemma4", "gemma4"
    if _has(template, "<parameter=", "</parameter>", "<function="):
        return "qwen3coder", "qwen3" if "<think>" in template or "</think>" in template else None
    if '<param name="' in template:
        return "minicpm5", "minicpm5"
    if any(
        marker in template
        for marker in ("<|assistant_tool_call|>", "<|tool_call_start|>", "keep_past_thinking")
    ):
        return "lfm2", "lfm2" if "message.thinking" in template else None
    if "functools" in template:
        return "phi4", None
    if _has(template, "[TOOL_CALLS]", "[ARGS]"):
        return "devstral", None
    if "[TOOL_CALLS]" in template or _has(template, "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]"):
        return "mistral", None
    if "<|python_tag|>" in template:
        return "llama3", None
    if _has(template, "<tool_call>", "</tool_call>"):
        return "hermes3", "qwen3" if _thinks(template) else None
    return None, "qwen3" if _thinks(template) else None


def detect_parsers(chat_template: str) -> tuple[str | None, str | None]:
    """(tool_parser, reasoning_parser) suited to a chat template; None where nothing matches."""
    return _analyze(chat_template)


def prompt_opens_reasoning(rendered_prompt: str, reasoning_parser: str) -> bool:
    """True when the prompt ends inside an open reasoning block (e.g. "...<think>\\n").

    DeepSeek-R1 and Qwen3 thinking templates append the opening tag to the generation prompt,
    so the model writes only the reasoning body and the closing tag; pass the result as
    make_output_parser(starts_in_reasoning=...). Harmony (gptoss) output always starts with
    its own channel header, so it never starts inside reasoning.
    """
    if reasoning_parser not in ("qwen3", "minicpm5"):
        return False
    return rendered_prompt.rstrip().endswith(OPEN_TAG)
