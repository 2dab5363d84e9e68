"""The regex check: refuse what XGrammar's regex converter would refuse although Python accepts it.

It is its own module because a regex reaches the engine on two roads, as a request's regex
constraint and inside a JSON schema (`pattern`, `patternProperties`), and both must be judged by
the same scan. The scan follows XGrammar's regex_converter.cc.
"""

from __future__ import annotations

import re
from typing import Any

from servables.errors import InvalidRequest

__all__ = ["check_regex"]


def _fail(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
# Python reads \012 as octal (a newline); XGrammar as \0 followed by "12".
_OCTAL = re.compile(r"\\0[0-9]")
_OCTAL_MESSAGE = "octal escapes like \\012 are not supported by the grammar engine (use \\xHH)"


def check_regex(pattern: Any, param: str) -> None:
    """Raise InvalidRequest unless both Python and the grammar engine accept the regex.

    Python's `re` catches malformed patterns; the scan below refuses what XGrammar's regex
    converter refuses although Python accepts it (backreferences, lookaround, word boundaries,
    inline flags, named groups, `\\p{...}`, empty classes, empty alternatives, stacked and
    possessive quantifiers, `{` that is not a repetition).
    """
    if not isinstance(pattern, str):
        raise _fail(param, f"{param} must be a string")
    try:
        re.compile(pattern)
    except re.error as error:
        raise _fail(param, f"{param} is not a valid regular expression: {error}") from error
    position = 0
    end = len(pattern)
    depth = 0
    previous_quantifier = False
    at_start = True  # nothing to repeat yet (start of pattern, after '(' or '|')

    def refuse(message: str) -> InvalidRequest:
        return _fail(param, f"{param}: {message} (at position {position + 1})")

    while position < end:
        char = pattern[position]
        quantifier = False
        if char == "\\":
            if position + 1 >= end:
                raise refuse("the escape sequence is not finished")
            following = pattern[position + 1]
            if (following.isdigit() and following != "0") or following == "k":
                raise refuse("backreferences are not supported by the grammar engine")
            if _OCTAL.match(pattern, position):
                raise refuse(_OCTAL_MESSAGE)
            if following in "pP":
                raise refuse("\\p{...} classes are not supported by the grammar engine")
            if following in "bB":
                raise refuse("word boundaries are not supported by the grammar engine")
            if following in "AZzG":
                raise refuse(f"\\{following} is not supported by the grammar engine")
            position += 2
            at_start = False
        elif char == "[":
            position += 1
            if position < end and pattern[position] == "^":
                position += 1
            if position < end and pattern[position] == "]":
                raise refuse("a character class starting with ']' is not supported")
            while position < end and pattern[position] != "]":
                if _OCTAL.match(pattern, position):
                    raise refuse(_OCTAL_MESSAGE)
                position += 2 if pattern[position] == "\\" else 1
            position += 1
            at_start = False
        elif char == "(":
            position += 1
            depth += 1
            if pattern.startswith("?", position):
                modifier = pattern[position + 1 : position + 3]
                if modifier.startswith(":"):
                    position += 2
                elif modifier.startswith(("=", "!")):
                    raise refuse("lookahead is not supported by the grammar engine")
                elif modifier in ("<=", "<!"):
                    raise refuse("lookbehind is not supported by the grammar engine")
                elif modifier.startswith("<") or modifier.startswith("P"):
                    raise refuse(
                        "named groups are not supported by the grammar engine (use a plain group)"
                    )
                else:
                    raise refuse("inline flags and group modifiers are not supported")
            at_start = True
        elif char == ")":
            depth -= 1
            position += 1
            at_start = False
        elif char == "|":
            if at_start or position + 1 >= end or pattern[position + 1] in "|)":
                raise refuse(
                    "empty alternatives are not supported by the grammar engine (write "
                    "(a)? instead of (a|))"
                )
            position += 1
            at_start = True
        elif char in "*+?":
            if at_start:
                raise refuse(f"'{char}' has nothing to repeat")
            if previous_quantifier:
                raise refuse("two repetition operators in a row are not supported")
            position += 1
            if position < end and pattern[position] == "?":
                position += 1  # lazy: the engine treats it as plain repetition
            if position < end and pattern[position] == "+":
                raise refuse("possessive repetition (like 'a++') is not supported")
            quantifier = True
        elif char == "{":
            match = _REPEAT.match(pattern, position)
            if match is None:
                raise refuse("'{' must start a repetition {m}, {m,} or {m,n} (escape it as \\{)")
            if at_start:
                raise refuse("'{' has nothing to repeat")
            if previous_quantifier:
                raise refuse("two repetition operators in a row are not supported")
            if match.group(3) and int(match.group(1)) > int(match.group(3)):
                raise refuse("the repetition's minimum is greater than its maximum")
            position = match.end()
            if position < end and pattern[position] == "?":
                position += 1
            if position < end and pattern[position] == "+":
                raise refuse("possessive repetition (like 'a{2}+') is not supported")
            quantifier = True
        else:
            position += 1
            at_start = False
        previous_quantifier = quantifier
    if depth != 0:
        raise _fail(param, f"{param}: unbalanced parentheses")
