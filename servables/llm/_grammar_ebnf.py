"""The EBNF check: parse a grammar the way XGrammar's GBNF parser would, and refuse what it would.

It is its own module because EBNF needs a tokenizer and a small recursive-descent parser of its
own, which share nothing with the JSON-schema or regex checks. It follows XGrammar's
grammar_parser.cc and encoding.cc.
"""

from __future__ import annotations

import re
from typing import Any

from servables.errors import InvalidRequest

__all__ = ["check_ebnf"]


def _fail(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


_EBNF_TOKEN = re.compile(
    r"""
    (?P<space>(?:[ \t\r\n]|\#[^\n]*)+)
  | (?P<define>::=)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<charclass>\[(?:[^\]\\\n]|\\.)+\])
  | (?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)
  | (?P<repeat>\{\s*\d+\s*(?:,\s*\d*\s*)?\})
  | (?P<op>[()|*+?])
  | (?P<lookahead>\(=)
    """,
    re.VERBOSE,
)


def check_ebnf(grammar: Any, param: str) -> None:
    """Raise InvalidRequest unless `grammar` is plain EBNF in XGrammar's (GBNF) syntax.

    Supported: `name ::= ...` rules with a `root` rule, string literals, character classes,
    rule references, grouping, `|`, `*`, `+`, `?` and `{m,n}`. XGrammar's extensions (lookahead
    assertions, TagDispatch and other macros) are refused, since they cannot be checked here.
    """
    if not isinstance(grammar, str) or not grammar.strip():
        raise _fail(param, f"{param} must be a non-empty string")
    tokens: list[tuple[str, str, int]] = []
    position = 0
    while position < len(grammar):
        match = _EBNF_TOKEN.match(grammar, position)
        if match is None or match.lastgroup == "lookahead":
            line = grammar.count("\n", 0, position) + 1
            raise _fail(
                param,
                f"{param}: unexpected text at line {line}: "
                f"{grammar[position : position + 20]!r} (supported: EBNF rules with strings, "
                "character classes, groups, |, *, +, ? and {m,n})",
            )
        kind = match.lastgroup or ""
        if kind != "space":
            tokens.append((kind, match.group(), grammar.count("\n", 0, position) + 1))
        position = match.end()
    _EbnfParser(tokens, param).parse()


# Escapes XGrammar's EBNF lexer knows (encoding.cc), and those it adds inside a class.
_EBNF_ESCAPES = {
    "'": 39,
    '"': 34,
    "?": 63,
    "\\": 92,
    "a": 7,
    "b": 8,
    "f": 12,
    "n": 10,
    "r": 13,
    "t": 9,
    "v": 11,
    "0": 0,
    "e": 27,
}
_EBNF_CLASS_ESCAPES = frozenset("^$.*+?()[]{}|/-")


class _EbnfParser:
    def __init__(self, tokens: list[tuple[str, str, int]], param: str) -> None:
        self.tokens = tokens
        self.index = 0
        self.param = param
        self.defined: set[str] = set()
        self.used: list[tuple[str, int]] = []

    def peek(self, offset: int = 0) -> tuple[str, str, int]:
        index = self.index + offset
        return self.tokens[index] if index < len(self.tokens) else ("end", "", 0)

    def fail(self, message: str) -> InvalidRequest:
        _, text, line = self.peek()
        where = f"line {line} near {text!r}" if text else "the end"
        return _fail(self.param, f"{self.param}: {message} at {where}")

    def at_rule_start(self) -> bool:
        return self.peek()[0] == "name" and self.peek(1)[0] == "define"

    def parse(self) -> None:
        if not self.tokens:
            raise self.fail("the grammar has no rules")
        while self.peek()[0] != "end":
            if not self.at_rule_start():
                raise self.fail("expected a rule `name ::= ...`")
            name = self.peek()[1]
            if self.index and self.tokens[self.index - 1][2] == self.peek()[2]:
                raise self.fail("a rule must start on a new line")
            if name in self.defined:
                raise self.fail(f"rule {name!r} is defined twice")
            self.defined.add(name)
            self.index += 2
            self.alternatives()
        if "root" not in self.defined:
            raise _fail(self.param, f"{self.param}: the grammar has no `root` rule")
        for name, line in self.used:
            if name not in self.defined:
                raise _fail(self.param, f"{self.param}: rule {name!r} (line {line}) is not defined")

    def alternatives(self) -> None:
        self.sequence()
        while self.peek()[1] == "|":
            self.index += 1
            self.sequence()

    def sequence(self) -> None:
        count = 0
        while True:
            kind, text, line = self.peek()
            if kind == "end" or text in ("|", ")") or self.at_rule_start():
                break
            if kind == "charclass" and re.search(r"\\[dwsDWS]", text):
                raise self.fail("escapes like \\d inside a character class are not supported")
            if kind == "string":
                self.codepoints(text[1:-1], in_class=False)
                self.index += 1
            elif kind == "charclass":
                self.character_class(text)
                self.index += 1
            elif kind == "name":
                self.used.append((text, line))
                self.index += 1
            elif text == "(":
                self.index += 1
                self.alternatives()
                if self.peek()[1] != ")":
                    raise self.fail("expected ')'")
                self.index += 1
            else:
                raise self.fail("expected a string, a character class, a rule name or '('")
            count += 1
            if self.peek()[0] == "repeat":
                bounds = [int(n) for n in re.findall(r"\d+", self.peek()[1])]
                if len(bounds) == 2 and bounds[0] > bounds[1]:
                    raise self.fail("the repetition's minimum is greater than its maximum")
                self.index += 1
            elif self.peek()[1] in ("*", "+", "?"):
                self.index += 1
        if count == 0:
            raise self.fail("expected an element")

    def codepoints(self, text: str, *, in_class: bool) -> list[int | None]:
        """The code points of a string literal's or a character class's text, as XGrammar's
        lexer reads them (None for an unescaped '-' in a class); refuses the escapes it does
        not know, which Python-style EBNF writers use freely."""
        result: list[int | None] = []
        position = 0
        while position < len(text):
            char = text[position]
            if char != "\\":
                result.append(None if in_class and char == "-" else ord(char))
                position += 1
                continue
            following = text[position + 1 : position + 2]
            if following in _EBNF_ESCAPES:
                result.append(_EBNF_ESCAPES[following])
                position += 2
            elif in_class and following and following in _EBNF_CLASS_ESCAPES:
                result.append(ord(following))
                position += 2
            elif following in ("x", "u", "U"):
                digits = re.match(r"[0-9a-fA-F]*", text[position + 2 :])
                run = digits.group() if digits else ""
                wanted = {"x": len(run), "u": 4, "U": 8}[following]
                if wanted == 0 or len(run) < wanted:
                    raise self.fail(
                        f"the escape \\{following} needs "
                        + ("hex digits" if following == "x" else f"{wanted} hex digits")
                    )
                value = int(run[:wanted], 16)
                if value > 0x10FFFF:
                    raise self.fail(
                        f"the escape \\{following}{run[:wanted]} is not a Unicode character"
                    )
                result.append(value)
                position += 2 + wanted
            else:
                raise self.fail(
                    f"the escape \\{following} is not supported (supported: \\n \\r \\t "
                    '\\\\ \\" and \\xHH, \\uHHHH, \\UHHHHHHHH)'
                )
        return result

    def character_class(self, text: str) -> None:
        body = text[1:-1]
        if body.startswith("^"):
            body = body[1:]
        items = self.codepoints(body, in_class=True)
        index = 0
        while index < len(items):
            low = items[index]
            if index + 2 < len(items) and items[index + 1] is None:
                high = items[index + 2]
                low_point = ord("-") if low is None else low
                high_point = ord("-") if high is None else high
                if low_point > high_point:
                    raise self.fail(
                        f"the character range {chr(low_point)!r}-{chr(high_point)!r} is reversed"
                    )
                index += 3
            else:
                index += 1
