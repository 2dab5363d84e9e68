"""The tool-call families: their markers, body readers and special tokens, by OVMS's names."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servables.llm.output_parsers._json_calls import JsonCallsReader, Layout, NamedArgumentsReader
from servables.llm.output_parsers._stage import BodyReader, Opening, ToolStage
from servables.llm.output_parsers.pythonic import PythonicCallsReader
from servables.llm.output_parsers.xml_calls import FUNCTION_TAG, XmlFunctionReader

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


def _mistral_body(marker: str, _schemas: object) -> BodyReader:
    return _MistralReader(marker)


class _MistralReader(BodyReader):
    """After `[TOOL_CALLS]`: a JSON list of calls (Mistral 7B v0.3, Nemo, Large) or
    `name[ARGS]{...}` (Devstral, Mistral Small 3.2, Magistral), told apart by the first
    non-blank character."""

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self._inner: BodyReader | None = None
        self._space = ""

    def feed(self, text: str, sink: Any) -> str:
        if self._inner is None:
            stripped = text.lstrip(" \t\n\r")
            self._space += text[: len(text) - len(stripped)]
            if not stripped:
                return ""
            marker = self._marker + self._space
            if stripped[0] in "[{":
                self._inner = JsonCallsReader(marker, Layout.LIST, require_arguments=False)
            else:
                self._inner = NamedArgumentsReader(marker, "[ARGS]")
            text = stripped
        rest = self._inner.feed(text, sink)
        self.done, self.rejected_text = self._inner.done, self._inner.rejected_text
        return rest

    def finish(self, sink: Any) -> None:
        if self._inner is None:
            self.rejected_text = self._marker + self._space
        else:
            self._inner.finish(sink)
            self.rejected_text = self._inner.rejected_text
        self.done = True


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
_MISTRAL_SPECIAL = ("</s>", "<s>", "[/INST]", "[INST]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]")

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
                Opening("<|python_tag|>", JsonCallsReader.factory(Layout.SEMICOLONS)),
                # Without the tag, a call is recognised only at the start of the output, and
                # a JSON object counts only if it has arguments (not any {"name": ...} answer).
                Opening(
                    "{",
                    JsonCallsReader.factory(Layout.SEMICOLONS, require_arguments=True),
                    leading_only=True,
                    part_of_body=True,
                ),
                Opening("[", _pythonic, leading_only=True, part_of_body=True),
            ),
            dropped=_LLAMA3_SPECIAL,
        ),
        ToolFamily(
            "mistral",
            keep_special_tokens=True,
            openings=(
                Opening("[TOOL_CALLS]", _mistral_body),
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
            openings=(Opening("[TOOL_CALLS]", _mistral_body),),
            dropped=_MISTRAL_SPECIAL,
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
                Opening(FUNCTION_TAG, XmlFunctionReader),
            ),
            dropped=("</tool_call>",),
        ),
    )
}
"""Marker-based families; gptoss (harmony) is a parser of its own."""
