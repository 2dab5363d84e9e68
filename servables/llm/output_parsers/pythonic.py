"""Pythonic calls: `[get_weather(city="Paris"), get_time()]` (Llama 3.2 / 3.3 / 4 in pythonic mode).

The arguments are Python literals, not JSON, so each list is read whole and then parsed with
`ast` (no code runs: only literals are accepted); the calls are reported when the list closes.
openvino-genai's Llama3PythonicToolParser is not used: on 2026.4 it keeps only string-valued
arguments (`n=3` disappears), reports only the first call of a list and leaves the call text
in the content.
"""

from __future__ import annotations

import ast
import json
from typing import Any

from servables.llm.output_parsers._stage import BodyReader, CallSink

__all__ = ["PythonicCallsReader", "parse_pythonic_calls"]

_CLOSERS = {"(": ")", "[": "]", "{": "}"}
_JSON_NAMES = {"true": True, "false": False, "null": None}


def parse_pythonic_calls(text: str) -> list[tuple[str, dict[str, Any]]] | None:
    """[(name, arguments)] for a list of calls with keyword arguments; None if it is not one."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    if not isinstance(tree.body, ast.List) or not tree.body.elts:
        return None
    calls: list[tuple[str, dict[str, Any]]] = []
    for node in tree.body.elts:
        if not isinstance(node, ast.Call) or node.args:
            return None
        name = _dotted_name(node.func)
        if name is None:
            return None
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            if keyword.arg is None:
                return None
            try:
                arguments[keyword.arg] = _literal(keyword.value)
            except ValueError:
                return None
        calls.append((name, arguments))
    return calls


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """A literal value; JSON's true/false/null are accepted too (models mix them in)."""
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[Any, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise ValueError("dict unpacking is not a literal")
            result[_literal(key)] = _literal(value)
        return result
    return ast.literal_eval(node)


class PythonicCallsReader(BodyReader):
    """Reads up to the `]` that closes the list, then reports every call in it."""

    def __init__(self, marker: str) -> None:
        self._marker = marker
        self._raw: list[str] = []
        self._stack: list[str] = []
        self._quote: str | None = None
        self._escaped = False
        self._head = ""  # the text before the first "(": must be "[" and a name

    def feed(self, text: str, sink: CallSink) -> str:
        for position, char in enumerate(text):
            if not self._step(char):
                self.rejected_text = self._marker + "".join(self._raw)
                self.done = True
                return text[position:]
            self._raw.append(char)
            if not self._stack and self._head.endswith("("):
                self.done = True
                self._report(sink)
                return text[position + 1 :]
        return ""

    def finish(self, sink: CallSink) -> None:
        self.rejected_text = self._marker + "".join(self._raw)
        self.done = True

    def _step(self, char: str) -> bool:
        if not self._head.endswith("("):
            return self._head_char(char)
        if self._quote is not None:
            if self._escaped:
                self._escaped = False
            elif char == "\\":
                self._escaped = True
            elif char == self._quote:
                self._quote = None
            return True
        if char in "\"'":
            self._quote = char
        elif char in _CLOSERS:
            self._stack.append(_CLOSERS[char])
        elif char in ")]}" and (not self._stack or self._stack.pop() != char):
            return False
        return True

    def _head_char(self, char: str) -> bool:
        """`[`, optional whitespace, a (dotted) name, `(`: anything else is not a call list."""
        head = self._head
        if not head:
            if char != "[":
                return False
            self._stack.append("]")
        elif char.isspace():
            if head.strip() != "[":
                return False
        elif char == "(":
            if head.strip() == "[":
                return False
            self._stack.append(")")
        elif not (char.isidentifier() if head.strip() == "[" else (char.isalnum() or char in "_.")):
            return False
        self._head = head + char
        return True

    def _report(self, sink: CallSink) -> None:
        calls = parse_pythonic_calls("".join(self._raw))
        if calls is None:
            self.rejected_text = self._marker + "".join(self._raw)
            return
        for name, arguments in calls:
            index = sink.begin(name)
            sink.arguments(index, json.dumps(arguments, ensure_ascii=False))
