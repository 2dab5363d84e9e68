"""The tool-call families: their markers, body readers and special tokens, by OVMS's names."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from servables.llm.output_parsers._json_calls import JsonCallsReader, Layout, NamedArgumentsReader
from servables.llm.output_parsers._stage import BodyReader, CallSink, Opening, ToolStage
from servables.llm.output_parsers.gemma4_calls import Gemma4CallsReader
from servables.llm.output_parsers.onyx import ONYX_SPECIAL, OnyxCallsReader
from servables.llm.output_parsers.pythonic import PythonicCallsReader
from servables.llm.output_parsers.xml_calls import MINICPM5, QWEN3_CODER, XmlFunctionReader

__all__ = ["TOOL_FAMILIES", "ToolFamily"]


@dataclass(frozen=True)
class ToolFamily:
    """How one family writes calls.

    `keep_special_tokens`: its markers are special tokens, so it must be fed text decoded with
    special tokens kept; `dropped` then lists the other special tokens it removes from content.
    """

    name: str
    keep_special_tokens: bool
    openings: tuple[Opening, ...]
    dropped: tuple[str, ...] = ()

    def stage(self, schemas: Mapping[str, Mapping[str, Any]]) -> ToolStage:
        return ToolStage(self.openings, self.dropped, schemas)


def _pythonic(marker: str, _schemas: object) -> BodyReader:
    return PythonicCallsReader(marker)


class _FirstCharacterReader(BodyReader):
    """Chooses the body's reader by its first non-blank character."""

    def __init__(self, marker: str, choose: Callable[[str, str], BodyReader]) -> None:
        self._marker = marker
        self._choose = choose
        self._inner: BodyReader | None = None
        self._space = ""

    def feed(self, text: str, sink: CallSink) -> str:
        if self._inner is None:
            stripped = text.lstrip(" \t\n\r")
            self._space += text[: len(text) - len(stripped)]
            if not stripped:
                return ""
            self._inner = self._choose(stripped[0], self._marker + self._space)
            text = stripped
        rest = self._inner.feed(text, sink)
        self.done, self.rejected_text = self._inner.done, self._inner.rejected_text
        return rest

    def finish(self, sink: CallSink) -> None:
        if self._inner is None:
            self.rejected_text = self._marker + self._space
        else:
            self._inner.finish(sink)
            self.rejected_text = self._inner.rejected_text
        self.done = True


def _minicpm5_call(marker: str, schemas: Mapping[str, Mapping[str, Any]]) -> BodyReader:
    return XmlFunctionReader(marker, schemas, MINICPM5)


def _mistral_body(marker: str, _schemas: object) -> BodyReader:
    """After `[TOOL_CALLS]`: a JSON list of calls (Mistral 7B v0.3, Nemo, Large) or
    `name[ARGS]{...}` (Devstral, Mistral Small 3.2, Magistral)."""

    def choose(first: str, given_back: str) -> BodyReader:
        if first in "[{":
            return JsonCallsReader(given_back, Layout.LIST, require_arguments=False)
        return NamedArgumentsReader(given_back, "[ARGS]")

    return _FirstCharacterReader(marker, choose)


def _python_tag_body(marker: str, _schemas: object) -> BodyReader:
    """After Llama's `<|python_tag|>`: JSON calls separated by ';', or a pythonic list."""

    def choose(first: str, given_back: str) -> BodyReader:
        if first == "[":
            return PythonicCallsReader(given_back)
        return JsonCallsReader(given_back, Layout.SEMICOLONS, require_arguments=False)

    return _FirstCharacterReader(marker, choose)


_LLAMA3_SPECIAL = (
    "<|eom_id|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|finetune_right_pad_id|>",
    "<|begin_of_text|>",
    "<|eom|>",
    "<|eot|>",
    "<|header_start|>",
    "<|header_end|>",
)
_MISTRAL_SPECIAL = ("</s>", "[/INST]", "[INST]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]")
# LFM2 / LFM2.5: the end of a call, end of turn and end of text (OVMS's Lfm2ToolParser).
LFM2_SPECIAL = ("<|tool_call_end|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>")
# Gemma 4: end of turn, a tool response opening, a stray end of call (OVMS's Gemma4ToolParser).
GEMMA4_SPECIAL = ("<turn|>", "<|tool_response>", "<tool_call|>", "<eos>")
# MiniCPM5: start of text and end of turn (OVMS's Minicpm5ToolParser erases them).
MINICPM5_SPECIAL = ("<s>", "<|im_end|>")

TOOL_FAMILIES: dict[str, ToolFamily] = {
    family.name: family
    for family in (
        ToolFamily(
            "hermes3",
            keep_special_tokens=False,
            openings=(Opening("<tool_call>", JsonCallsReader.factory(Layout.SINGLE)),),
            dropped=("</tool_call>",),
        ),
        ToolFamily(
            "llama3",
            keep_special_tokens=True,
            openings=(
                Opening("<|python_tag|>", _python_tag_body, special_token=True),
                # Without the tag (Llama 3.1 with JSON tool calling writes bare objects), a
                # call counts only if the object has arguments, not any {"name": ...} answer;
                # it may follow text when the call came from guided generation.
                Opening(
                    "{",
                    JsonCallsReader.factory(Layout.SEMICOLONS, require_arguments=True),
                    leading_only=True,
                    part_of_body=True,
                ),
                Opening(
                    '{"name":',
                    JsonCallsReader.factory(Layout.SEMICOLONS, require_arguments=True),
                    part_of_body=True,
                ),
                # Pythonic lists (Llama 3.2 / 4) only as the whole output, as vLLM reads them.
                Opening("[", _pythonic, leading_only=True, part_of_body=True),
            ),
            dropped=_LLAMA3_SPECIAL,
        ),
        ToolFamily(
            "mistral",
            keep_special_tokens=True,
            openings=(
                Opening("[TOOL_CALLS]", _mistral_body, special_token=True),
                # The tagless list OVMS also accepts (the tag skipped as a special token).
                Opening(
                    "[{",
                    JsonCallsReader.factory(Layout.LIST, require_arguments=True),
                    leading_only=True,
                    part_of_body=True,
                ),
            ),
            dropped=_MISTRAL_SPECIAL,
        ),
        ToolFamily(
            "devstral",
            keep_special_tokens=True,
            openings=(Opening("[TOOL_CALLS]", _mistral_body, special_token=True),),
            dropped=_MISTRAL_SPECIAL,
        ),
        ToolFamily(
            # Liquid's LFM2 and LFM2.5: `<|tool_call_start|>[name(arg=value), ...]<|tool_call_end|>`
            # with Python literals, its markers special tokens.
            "lfm2",
            keep_special_tokens=True,
            openings=(Opening("<|tool_call_start|>", _pythonic, special_token=True),),
            dropped=LFM2_SPECIAL,
        ),
        ToolFamily(
            # Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:1}<tool_call|>`.
            "gemma4",
            keep_special_tokens=True,
            openings=(Opening("<|tool_call>", Gemma4CallsReader, special_token=True),),
            dropped=GEMMA4_SPECIAL,
        ),
        ToolFamily(
            # Onyx: `<atem:function_calls><atem:invoke name="f"><atem:parameter name="p">v
            # </atem:parameter></atem:invoke></atem:function_calls>` inside a turn's body.
            "onyx",
            keep_special_tokens=True,
            openings=(Opening("<atem:function_calls>", OnyxCallsReader),),
            dropped=ONYX_SPECIAL,
        ),
        ToolFamily(
            "phi4",
            keep_special_tokens=False,
            openings=(Opening("functools", JsonCallsReader.factory(Layout.LIST)),),
        ),
        ToolFamily(
            "qwen3coder",
            keep_special_tokens=False,
            openings=(
                Opening("<tool_call>", XmlFunctionReader),
                Opening(QWEN3_CODER.function, XmlFunctionReader),
            ),
            dropped=("</tool_call>",),
        ),
        ToolFamily(
            # MiniCPM5: `<function name="f"><param name="p">v</param></function>`, one after
            # another; fed with special tokens kept, as its reasoning tags are special tokens.
            "minicpm5",
            keep_special_tokens=True,
            openings=(Opening(MINICPM5.function, _minicpm5_call),),
            dropped=MINICPM5_SPECIAL,
        ),
    )
}
"""Marker-based families; gptoss (harmony) is a parser of its own."""
