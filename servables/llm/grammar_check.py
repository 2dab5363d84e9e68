"""Check JSON schemas, regexes and EBNF grammars before they reach the engine's grammar backend.

openvino-genai compiles a request's grammar (XGrammar 0.1.x) lazily, inside the engine step that
first samples the request, and a grammar that fails to compile there leaves the whole
continuous-batching pipeline broken: that step and every later one raise, for every request
(measured with openvino-genai 2026.4.1: "Internal error: this function cannot be called when we
are already in scheduling phase"). The compiler is not reachable from Python, so what it would
refuse is refused here first, with a message naming the request field, and the engine only ever
sees grammars that compile. (Should one slip through, the engine worker fails only its request
and rebuilds its pipeline, and the frontend remembers the grammar: servables/engine/batching.py.)

The checks follow XGrammar's converters (json_schema_converter.cc, regex_converter.cc,
grammar_parser.cc) and are conservative: what they cannot vouch for is refused. JSON-schema
keywords XGrammar ignores without a word (`not`, `if`/`then`/`else`, `dependentRequired`,
`dependentSchemas`, `uniqueItems`, `contains`, `minContains`, `maxContains`, `multipleOf`,
`allOf` with several entries, a `$ref` outside the document) are refused too: accepting them
would promise output the engine does not enforce. So are validation keywords next to `$ref`,
`anyOf`, `oneOf`, `allOf`, `const` or `enum`, which XGrammar skips (it uses the first of those
it finds), and `pattern` together with `minLength`/`maxLength`. XGrammar's schemas are strict: an
array without `items` has no items beyond `prefixItems`, an object without
`additionalProperties` no properties beyond `properties`, so `minItems` / `minProperties` that
ask for more are refused; integer bounds must fit XGrammar's int64.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from servables.errors import InvalidRequest

__all__ = ["check_ebnf", "check_json_schema", "check_regex", "json_schema_text"]

MAX_SCHEMA_DEPTH = 64
INT64_LIMIT = 1 << 63
INT32_LIMIT = 1 << 31

_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})
_IGNORED_BY_ENGINE = (
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
    "multipleOf",
)
# Keywords that only describe; XGrammar ignores them, and so may everyone.
_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "$anchor",
        "$defs",
        "definitions",
        "format",
        "contentEncoding",
        "contentMediaType",
        "nullable",
        "discriminator",
        "strict",
    }
)
# XGrammar picks the first of these present and ignores every other validation keyword.
_EXCLUSIVE = ("$ref", "const", "enum", "anyOf", "oneOf", "allOf")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_VALUES = (
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
)
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _fail(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(message, param=param)


# ------------------------------------------------------------------------------ JSON schema


def json_schema_text(schema: Any, param: str) -> str:
    """Check a JSON schema (a dict, or JSON text) and return it as the JSON text genai takes."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as error:
            raise _fail(param, f"{param} is not valid JSON: {error}") from error
    check_json_schema(schema, param)
    return json.dumps(schema, ensure_ascii=False)


def check_json_schema(schema: Any, param: str) -> None:
    """Raise InvalidRequest (naming `param`) unless the engine enforces `schema` fully."""
    if schema is True:
        return
    if not isinstance(schema, dict):
        raise _fail(param, f"{param} must be a JSON schema object")
    _Checker(schema, param).visit(schema, param, 0)


class _Checker:
    def __init__(self, root: dict[str, Any], param: str) -> None:
        self.root = root
        self.param = param

    def fail(self, where: str, message: str) -> InvalidRequest:
        return _fail(self.param, f"{where}: {message}")

    def visit(self, schema: Any, where: str, depth: int) -> None:
        if depth > MAX_SCHEMA_DEPTH:
            raise self.fail(where, f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        if isinstance(schema, bool):
            if not schema:
                raise self.fail(where, "the schema `false` accepts no value")
            return
        if not isinstance(schema, dict):
            raise self.fail(where, "a schema must be an object or a boolean")
        for keyword in _IGNORED_BY_ENGINE:
            if keyword in schema:
                raise self.fail(
                    where,
                    f"the JSON schema keyword '{keyword}' is not supported by the grammar "
                    "engine (it would not be enforced)",
                )
        exclusive = [keyword for keyword in _EXCLUSIVE if keyword in schema]
        if exclusive:
            self.check_exclusive(schema, exclusive, where)
        else:
            self.check_type(schema, where)
        for child, child_where in self.children(schema, where):
            self.visit(child, child_where, depth + 1)

    def check_exclusive(self, schema: dict[str, Any], present: list[str], where: str) -> None:
        keyword = present[0]
        typed = keyword in ("const", "enum")  # a `type` beside them says the same thing
        extra = sorted(
            key
            for key in schema
            if key not in _ANNOTATIONS and key != keyword and not (key == "type" and typed)
        )
        if extra:
            raise self.fail(
                where,
                f"'{keyword}' cannot be combined with {', '.join(repr(e) for e in extra)}: the "
                "grammar engine would ignore them (put them inside the alternatives)",
            )
        value = schema[keyword]
        if keyword == "$ref":
            self.resolve(value, where)
        elif keyword == "enum":
            if not isinstance(value, list) or not value:
                raise self.fail(where, "enum must be a non-empty array")
        elif keyword in ("anyOf", "oneOf"):
            if not isinstance(value, list) or not value:
                raise self.fail(where, f"{keyword} must be a non-empty array")
        elif keyword == "allOf" and (not isinstance(value, list) or len(value) != 1):
            raise self.fail(
                where,
                "allOf is supported with exactly one schema (the grammar engine does not "
                "merge several)",
            )

    def resolve(self, ref: Any, where: str) -> None:
        if not isinstance(ref, str):
            raise self.fail(where, "$ref must be a string")
        if ref == "#":
            return
        if not ref.startswith("#/"):
            raise self.fail(
                where, f"$ref {ref!r} is not supported: only references inside the schema ('#/...')"
            )
        current: Any = self.root
        for part in ref[2:].split("/"):
            if not part:
                continue
            key = part.replace("~1", "/").replace("~0", "~")
            # XGrammar follows object keys only, never array indices.
            if isinstance(current, dict) and key in current:
                current = current[key]
            else:
                raise self.fail(where, f"$ref {ref!r} does not resolve inside the schema")

    def check_type(self, schema: dict[str, Any], where: str) -> None:
        kind = schema.get("type")
        kinds: list[str]
        if kind is None:
            if any(k in schema for k in ("properties", "additionalProperties", "required")):
                kinds = ["object"]
            elif any(k in schema for k in ("items", "prefixItems")):
                kinds = ["array"]
            else:
                kinds = []
        elif isinstance(kind, str):
            kinds = [kind]
        elif isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
            kinds = list(kind)
        else:
            raise self.fail(where, "type must be a string or a non-empty array of strings")
        for name in kinds:
            if name not in _TYPES:
                raise self.fail(where, f"unknown type {name!r}")
        if "integer" in kinds:
            self.check_bounds(schema, where, integer=True)
        elif "number" in kinds:
            self.check_bounds(schema, where, integer=False)
        if "string" in kinds:
            self.check_string(schema, where)
        if "array" in kinds:
            self.check_array(schema, where)
        if "object" in kinds:
            self.check_object(schema, where)

    def check_bounds(self, schema: dict[str, Any], where: str, *, integer: bool) -> None:
        low = high = None
        for key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if key not in schema:
                continue
            value = schema[key]
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise self.fail(where, f"{key} must be a number")
            if isinstance(value, float) and not math.isfinite(value):
                raise self.fail(where, f"{key} must be a finite number")
            # Compared as written: an int above 2**53 is whole although its float is not exact.
            if integer and isinstance(value, float) and not value.is_integer():
                raise self.fail(where, f"{key} of an integer must be a whole number")
            if integer:
                self.check_integer_bound(key, value, where)
            if key.endswith("inimum"):
                low = value if low is None else max(low, value)
            else:
                high = value if high is None else min(high, value)
        if low is not None and high is not None and low > high:
            raise self.fail(where, f"the minimum ({low}) is greater than the maximum ({high})")
        if integer:
            # The engine's own range: an exclusive bound replaces the inclusive one.
            start = schema.get("minimum")
            if "exclusiveMinimum" in schema:
                start = int(schema["exclusiveMinimum"]) + 1
            end = schema.get("maximum")
            if "exclusiveMaximum" in schema:
                end = int(schema["exclusiveMaximum"]) - 1
            if start is not None and end is not None and start > end:
                raise self.fail(where, "no integer lies within the minimum and maximum given")

    def check_integer_bound(self, key: str, value: int | float, where: str) -> None:
        """XGrammar holds integer bounds as int64; JSON numbers it reads as doubles (written
        with a fraction or exponent, or beyond int64) must stay strictly inside +-2**63."""
        whole = int(value)
        if isinstance(value, float):
            fits = -INT64_LIMIT < whole < INT64_LIMIT
        else:
            fits = -INT64_LIMIT <= whole < INT64_LIMIT
        if not fits:
            raise self.fail(
                where,
                f"{key} ({value}) is outside the range of integer bounds the grammar engine "
                f"supports (-2**63 to 2**63-1)",
            )
        if (key == "exclusiveMinimum" and whole == INT64_LIMIT - 1) or (
            key == "exclusiveMaximum" and whole == -INT64_LIMIT
        ):
            raise self.fail(where, f"{key} ({value}) leaves no integer the grammar engine supports")

    def check_string(self, schema: dict[str, Any], where: str) -> None:
        lengths = [key for key in ("minLength", "maxLength") if key in schema]
        for key in lengths:
            value = schema[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise self.fail(where, f"{key} must be a non-negative integer")
        if lengths and schema.get("minLength", 0) > schema.get("maxLength", float("inf")):
            raise self.fail(where, "minLength is greater than maxLength")
        if "pattern" in schema:
            if lengths:
                raise self.fail(
                    where,
                    "pattern cannot be combined with minLength/maxLength: the grammar engine "
                    "would ignore the lengths",
                )
            pattern = schema["pattern"]
            if not isinstance(pattern, str):
                raise self.fail(where, "pattern must be a string")
            try:
                check_regex(pattern, self.param)
            except InvalidRequest as error:
                raise self.fail(where, f"pattern: {error.message}") from error

    def check_array(self, schema: dict[str, Any], where: str) -> None:
        counts = {}
        for key in ("minItems", "maxItems"):
            if key in schema:
                value = schema[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise self.fail(where, f"{key} must be a non-negative integer")
                counts[key] = value
        if counts.get("minItems", 0) > counts.get("maxItems", 1 << 62):
            raise self.fail(where, "minItems is greater than maxItems")
        items = schema.get("items")
        if items is not None and not isinstance(items, (bool, dict)):
            raise self.fail(where, "items must be a schema (an object or a boolean)")
        prefix = schema.get("prefixItems", [])
        if not isinstance(prefix, list):
            raise self.fail(where, "prefixItems must be an array")
        if "maxItems" in counts and counts["maxItems"] < len(prefix):
            raise self.fail(where, "maxItems is less than the number of prefixItems")
        if any(value >= INT64_LIMIT for value in counts.values()):
            raise self.fail(where, "minItems and maxItems must be below 2**63")
        # XGrammar's schemas are strict: without `items` (or `unevaluatedItems`) an array
        # has no items beyond prefixItems.
        extra = items if "items" in schema else schema.get("unevaluatedItems", False)
        if extra is False and counts.get("minItems", 0) > len(prefix):
            raise self.fail(
                where,
                f"minItems ({counts['minItems']}) asks for more items than prefixItems has "
                f"({len(prefix)}), and no other items are allowed (give `items` a schema)",
            )

    def check_object(self, schema: dict[str, Any], where: str) -> None:
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            raise self.fail(where, "properties must be an object")
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise self.fail(where, "required must be an array of strings")
        additional = schema.get("additionalProperties", True)
        if not isinstance(additional, (bool, dict)):
            raise self.fail(where, "additionalProperties must be a schema")
        if additional is False and "patternProperties" not in schema:
            missing = [name for name in required if name not in properties]
            if missing:
                raise self.fail(
                    where,
                    f"required properties {missing} are not in properties, and additional "
                    "properties are not allowed",
                )
        counts = {}
        for key in ("minProperties", "maxProperties"):
            if key in schema:
                value = schema[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise self.fail(where, f"{key} must be a non-negative integer")
                counts[key] = value
        if counts.get("minProperties", 0) > counts.get("maxProperties", 1 << 62):
            raise self.fail(where, "minProperties is greater than maxProperties")
        if "maxProperties" in counts and counts["maxProperties"] < len(set(required)):
            raise self.fail(where, "maxProperties is less than the number of required properties")
        if any(value >= INT32_LIMIT for value in counts.values()):
            raise self.fail(where, "minProperties and maxProperties must be below 2**31")
        # Strict schemas again: no properties beyond `properties` unless something allows them.
        closed = (
            schema.get("additionalProperties", False) is False
            and schema.get("unevaluatedProperties", False) is False
            and not schema.get("patternProperties")
            and "propertyNames" not in schema
        )
        if closed and counts.get("minProperties", 0) > len(properties):
            raise self.fail(
                where,
                f"minProperties ({counts['minProperties']}) asks for more properties than "
                f"`properties` lists ({len(properties)}), and no other properties are allowed "
                "(give additionalProperties a schema)",
            )
        patterns = schema.get("patternProperties", {})
        if not isinstance(patterns, dict):
            raise self.fail(where, "patternProperties must be an object")
        for pattern in patterns:
            try:
                check_regex(pattern, self.param)
            except InvalidRequest as error:
                raise self.fail(where, f"patternProperties: {error.message}") from error

    def children(self, schema: dict[str, Any], where: str) -> Iterator[tuple[Any, str]]:
        for key in _SCHEMA_MAPS:
            value = schema.get(key)
            if isinstance(value, dict):
                for name, child in value.items():
                    yield child, f"{where}.{key}.{name}"
        for key in _SCHEMA_VALUES:
            if key in schema and not isinstance(schema[key], bool):
                yield schema[key], f"{where}.{key}"
        for key in _SCHEMA_LISTS:
            value = schema.get(key)
            if isinstance(value, list):
                for index, child in enumerate(value):
                    yield child, f"{where}.{key}[{index}]"


# ------------------------------------------------------------------------------------ regex

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


# ------------------------------------------------------------------------------------- EBNF

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
