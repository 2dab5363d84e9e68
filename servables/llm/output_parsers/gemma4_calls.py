"""Gemma 4's tool calls: `<|tool_call>call:name{key:value,...}<tool_call|>` (OVMS's `gemma4`).

Keys are bare words; strings are wrapped in `<|"|>` instead of quotes; numbers, true, false and
null are bare; values nest as `{...}` objects and `[...]` lists in the same syntax. Several
calls may follow each other inside one block (`call:a{...}call:b{...}`). The reader keeps the
block until its closing tag (or the end of generation), then reports each call with its
arguments as JSON; a block that is not calls is given back as content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from servables.llm.output_parsers._stage import ClosedBlockReader

__all__ = ["CLOSE_TAG", "Gemma4CallsReader", "parse_calls"]

CLOSE_TAG = "<tool_call|>"
STRING = '<|"|>'
_NAME = re.compile(r"\s*call:([A-Za-z_][\w.\-]*)\s*\{")
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][+-]?\d+)?$")


class _Syntax(ValueError):
    """The text is not Gemma 4's call syntax."""


def _value(text: str, pos: int) -> tuple[Any, int]:
    if text.startswith(STRING, pos):
        end = text.find(STRING, pos + len(STRING))
        if end < 0:
            raise _Syntax("unterminated string")
        return text[pos + len(STRING) : end], end + len(STRING)
    if text.startswith("{", pos):
        return _object(text, pos + 1)
    if text.startswith("[", pos):
        return _list(text, pos + 1)
    end = pos
    while end < len(text) and text[end] not in ",}]":
        end += 1
    word = text[pos:end].strip()
    lowered = word.lower()
    if lowered in ("true", "false", "null"):
        return {"true": True, "false": False, "null": None}[lowered], end
    if _NUMBER.match(word):
        return json.loads(word), end
    if not word:
        raise _Syntax("missing value")
    return word, end


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _items(text: str, pos: int, closer: str, item: Callable[[int], int]) -> int:
    """Reads `item, item, ...closer` from `pos` (each `item(pos)` returns where it ended);
    returns the position after the closer."""
    pos = _skip_space(text, pos)
    if text.startswith(closer, pos):
        return pos + 1
    while True:
        pos = _skip_space(text, item(_skip_space(text, pos)))
        if text.startswith(",", pos):
            pos += 1
        elif text.startswith(closer, pos):
            return pos + 1
        else:
            raise _Syntax(f"expected ',' or '{closer}'")


def _object(text: str, pos: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}

    def member(pos: int) -> int:
        if text.startswith(STRING, pos):  # a key may be written as a string too
            key, pos = _value(text, pos)
        else:
            colon = text.find(":", pos)
            if colon < 0:
                raise _Syntax("missing ':'")
            key, pos = text[pos:colon].strip(), colon
        pos = _skip_space(text, pos)
        if not text.startswith(":", pos):
            raise _Syntax("missing ':'")
        result[str(key)], pos = _value(text, _skip_space(text, pos + 1))
        return pos

    return result, _items(text, pos, "}", member)


def _list(text: str, pos: int) -> tuple[list[Any], int]:
    result: list[Any] = []

    def element(pos: int) -> int:
        value, pos = _value(text, pos)
        result.append(value)
        return pos

    return result, _items(text, pos, "]", element)


def parse_calls(body: str) -> list[tuple[str, dict[str, Any]]]:
    """Every `call:name{...}` of a block's text, in order; raises ValueError if it is not calls
    (or has text after the last one)."""
    calls = []
    pos = 0
    while _skip_space(body, pos) < len(body):
        match = _NAME.match(body, pos)
        if match is None:
            raise _Syntax("expected call:name{")
        arguments, pos = _object(body, match.end())
        calls.append((match[1], arguments))
    if not calls:
        raise _Syntax("no call")
    return calls


class Gemma4CallsReader(ClosedBlockReader):
    """Keeps the block up to `<tool_call|>`, then reports its calls (see the module docstring)."""

    close_tag = CLOSE_TAG

    def __init__(self, marker: str, _schemas: object = None) -> None:
        super().__init__(marker)

    def calls(self, block: str) -> list[tuple[str, dict[str, Any]]]:
        return parse_calls(block)
