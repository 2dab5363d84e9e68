"""Incremental JSON for streamed tool-call arguments: check as it arrives, finish what was cut.

Arguments are streamed to the client as the model writes them, and a streamed fragment cannot be
taken back. So each character is checked before it is released (the released text is always
the prefix of some valid JSON value), and when generation stops mid-value the released text is
completed by appending: every valid JSON prefix can be closed by adding characters (close the
string, finish the number or literal, close the containers). Two things are held back rather
than released, because completing them would invent data: an object member until its colon
(a key cut in half, or a key without a value) and a comma until the next element starts.

Small models write near-JSON; two slips are repaired on the fly instead of rejected: raw
control characters inside strings (a literal newline in generated code) are escaped, and an
invalid escape such as `\\'` becomes an escaped backslash followed by the character.
"""

from __future__ import annotations

import enum
import json
from typing import Any

__all__ = ["JsonScanner", "complete_json"]

_WHITESPACE = " \t\n\r"
_HEX = "0123456789abcdefABCDEF"
_SIMPLE_ESCAPES = '"\\/bfnrt'
_CONTROL_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


class _State(enum.Enum):
    VALUE = enum.auto()  # a value must come (after ':' or ',' in an array, or at the top)
    VALUE_OR_END = enum.auto()  # just after '[': a value or ']'
    KEY_OR_END = enum.auto()  # just after '{': a key or '}'
    KEY = enum.auto()  # after ',' in an object: a key must come
    COLON = enum.auto()  # after a key
    AFTER = enum.auto()  # after a value inside a container: ',' or the closer
    STRING = enum.auto()
    ESCAPE = enum.auto()  # after a backslash in a string
    UNICODE = enum.auto()  # inside \uXXXX
    NUMBER = enum.auto()
    LITERAL = enum.auto()  # inside true / false / null
    DONE = enum.auto()


# Number prefixes as a small automaton: state -> {character class -> next state}; the states
# in _NUMBER_COMPLETE end a valid number, the others need a digit appended.
_NUMBER_MOVES: dict[str, dict[str, str]] = {
    "start": {"-": "sign", "0": "zero", "1": "int"},
    "sign": {"0": "zero", "1": "int"},
    "zero": {".": "dot", "e": "e"},
    "int": {"0": "int", "1": "int", ".": "dot", "e": "e"},
    "dot": {"0": "frac", "1": "frac"},
    "frac": {"0": "frac", "1": "frac", "e": "e"},
    "e": {"+": "esign", "-": "esign", "0": "exp", "1": "exp"},
    "esign": {"0": "exp", "1": "exp"},
    "exp": {"0": "exp", "1": "exp"},
}
_NUMBER_COMPLETE = {"zero", "int", "frac", "exp"}


def _number_class(char: str) -> str:
    if char == "0":
        return "0"
    if "1" <= char <= "9":
        return "1"
    return "e" if char in "eE" else char


class JsonScanner:
    """Checks one JSON value character by character and can complete any prefix it accepted.

    `feed(c)` returns the text to release for `c`: usually `c`, an escape sequence for a raw
    control character, "" while an escape is pending, or None when `c` cannot continue the
    value. After None, `done` tells the two cases apart: the value had already ended (a number
    ends at the first character that is not part of it; `c` belongs to whatever follows) or
    `c` is a syntax error. Released text minus `held` characters at its end is safe to send;
    `completion()` is what closes the safe part.
    """

    __slots__ = (
        "_key_chars",
        "_literal_rest",
        "_number_state",
        "_stack",
        "_state",
        "_string_is_key",
        "_unicode_left",
        "held",
        "last_key",
    )

    def __init__(self) -> None:
        self._state = _State.VALUE
        self._stack: list[str] = []
        self._string_is_key = False
        self._unicode_left = 0
        self._number_state = "start"
        self._literal_rest = ""
        self._key_chars: list[str] = []
        self.held = 0
        """How many released characters at the end are not safe yet (a pending member/comma)."""
        self.last_key: str | None = None
        """The most recent object key completed, decoded (None before any)."""

    @property
    def done(self) -> bool:
        """The value is complete (for a number: a character that ends it has been seen)."""
        return self._state is _State.DONE

    @property
    def depth(self) -> int:
        """How many containers are open."""
        return len(self._stack)

    @property
    def expects_value(self) -> bool:
        """A value would start at the next non-whitespace character (after ':' for a member)."""
        return self._state in (_State.VALUE, _State.VALUE_OR_END)

    def skip_value(self) -> None:
        """Someone else read the value that was expected here; continue after it."""
        assert self.expects_value and self._stack, "no value is expected inside a container"
        self._state = _State.AFTER
        self.held = 0

    def feed(self, char: str) -> str | None:
        state = self._state
        if state is _State.STRING:
            return self._string_char(char)
        if state is _State.ESCAPE:
            self._state = _State.STRING
            if char == "u":
                self._state = _State.UNICODE
                self._unicode_left = 4
                return self._string_text("\\u")
            if char in _SIMPLE_ESCAPES:
                return self._string_text("\\" + char)
            return self._string_text("\\\\" + self._control_escaped(char))
        if state is _State.UNICODE:
            if char not in _HEX:
                return None
            self._unicode_left -= 1
            if self._unicode_left == 0:
                self._state = _State.STRING
            return self._string_text(char)
        if state is _State.NUMBER:
            next_state = _NUMBER_MOVES[self._number_state].get(_number_class(char))
            if next_state is not None:
                self._number_state = next_state
                return self._emit(char)
            if self._number_state not in _NUMBER_COMPLETE:
                return None
            self._value_ended()
            return None if self._state is _State.DONE else self.feed(char)
        if state is _State.LITERAL:
            if char != self._literal_rest[0]:
                return None
            self._literal_rest = self._literal_rest[1:]
            if not self._literal_rest:
                self._value_ended()
            return self._emit(char)
        if state is _State.DONE:
            return None
        if char in _WHITESPACE:
            return self._emit(char)
        return self._structural(char)

    def completion(self) -> str:
        """Text that, appended to the safe part of the released text, makes it valid JSON."""
        state = self._state
        if self.held:
            # The pending member or comma is dropped: only the containers remain to be closed.
            tail = ""
        elif state is _State.STRING:
            tail = '"'
        elif state is _State.ESCAPE:
            tail = '"'  # the backslash itself was never released
        elif state is _State.UNICODE:
            tail = "0" * self._unicode_left + '"'
        elif state is _State.NUMBER:
            tail = "" if self._number_state in _NUMBER_COMPLETE else "0"
        elif state is _State.LITERAL:
            tail = self._literal_rest
        elif state is _State.VALUE:
            tail = "null"
        else:
            tail = ""
        closers = "".join("}" if opener == "{" else "]" for opener in reversed(self._stack))
        return tail + closers

    # -- internals ------------------------------------------------------------------------

    def _emit(self, text: str) -> str:
        if self.held:
            self.held += len(text)
        return text

    @staticmethod
    def _control_escaped(char: str) -> str:
        if char in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[char]
        if char < " ":
            return f"\\u{ord(char):04x}"
        return char

    def _string_text(self, text: str) -> str:
        if self._string_is_key:
            self._key_chars.append(text)
        return self._emit(text)

    def _string_char(self, char: str) -> str:
        if char == "\\":
            self._state = _State.ESCAPE
            return ""
        if char == '"':
            if self._string_is_key:
                self.last_key = json.loads('"' + "".join(self._key_chars) + '"')
                self._state = _State.COLON
            else:
                self._value_ended()
            return self._emit(char)
        return self._string_text(self._control_escaped(char))

    def _structural(self, char: str) -> str | None:
        state = self._state
        if state in (_State.VALUE, _State.VALUE_OR_END):
            if char == "]" and state is _State.VALUE_OR_END:
                return self._close("[", char)
            return self._start_value(char)
        if state in (_State.KEY_OR_END, _State.KEY):
            if char == '"':
                # The member is held from its quote (or the comma before it) to its colon.
                text = self._emit(char)
                self.held = self.held or 1
                self._state = _State.STRING
                self._string_is_key = True
                self._key_chars = []
                return text
            if char == "}" and state is _State.KEY_OR_END:
                return self._close("{", char)
            return None
        if state is _State.COLON:
            if char != ":":
                return None
            text = self._emit(char)
            self.held = 0
            self._state = _State.VALUE
            return text
        if state is _State.AFTER:
            if char == ",":
                text = self._emit(char)
                self.held = 1
                self._state = _State.KEY if self._stack[-1] == "{" else _State.VALUE
                return text
            if char in "}]":
                return self._close("{" if char == "}" else "[", char)
            return None
        return None

    def _start_value(self, char: str) -> str | None:
        if char == "{" or char == "[":
            self._stack.append(char)
            self._state = _State.KEY_OR_END if char == "{" else _State.VALUE_OR_END
            text = self._emit(char)
            self.held = 0
            return text
        if char == '"':
            self._state = _State.STRING
            self._string_is_key = False
        elif char == "-" or "0" <= char <= "9":
            self._state = _State.NUMBER
            self._number_state = _NUMBER_MOVES["start"][_number_class(char)]
        elif char in "tfn":
            self._state = _State.LITERAL
            self._literal_rest = {"t": "rue", "f": "alse", "n": "ull"}[char]
        else:
            return None
        text = self._emit(char)
        self.held = 0
        return text

    def _close(self, opener: str, char: str) -> str | None:
        if not self._stack or self._stack[-1] != opener:
            return None
        self._stack.pop()
        text = self._emit(char)
        self._value_ended()
        return text

    def _value_ended(self) -> None:
        self._state = _State.AFTER if self._stack else _State.DONE


def complete_json(text: str) -> str | None:
    """`text` as valid JSON: itself, or completed if it is a cut-off prefix; None if invalid."""
    scanner = JsonScanner()
    released: list[str] = []
    for char in text.strip():
        out = scanner.feed(char)
        if out is None:
            return None
        released.append(out)
    if not released:
        return None
    safe = "".join(released)
    if scanner.held:
        safe = safe[: len(safe) - scanner.held]
    return safe + scanner.completion()


def loads_or_none(text: str) -> Any:
    """json.loads, or None when `text` is not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return None
