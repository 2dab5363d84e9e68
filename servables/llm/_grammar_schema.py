"""The JSON-schema check: refuse what XGrammar's JSON-schema converter would refuse or ignore.

It is its own module because it is the largest of the three checks and the only one that walks a
tree (a schema and its `$ref`s); it borrows only the regex check, for `pattern` and
`patternProperties`. It follows XGrammar's json_schema_converter.cc and is conservative: what it
cannot vouch for is refused. JSON-schema keywords XGrammar ignores without a word (`not`,
`if`/`then`/`else`, `dependentRequired`, `dependentSchemas`, `uniqueItems`, `contains`,
`minContains`, `maxContains`, `multipleOf`, `allOf` with several entries, a `$ref` outside the
document) are refused too: accepting them would promise output the engine does not enforce. So are
validation keywords next to `$ref`, `anyOf`, `oneOf`, `allOf`, `const` or `enum`, which XGrammar
skips (it uses the first of those it finds), and `pattern` together with `minLength`/`maxLength`.
XGrammar's schemas are strict: an array without `items` has no items beyond `prefixItems`, an
object without `additionalProperties` no properties beyond `properties`, so `minItems` /
`minProperties` that ask for more are refused; integer bounds must fit XGrammar's int64.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from servables.errors import InvalidRequest
from servables.io.request_fields import is_integer, is_number
from servables.llm._grammar_regex import check_regex

__all__ = ["check_json_schema", "json_schema_text"]

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
            if not is_number(value):
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
            if not is_integer(value) or value < 0:
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
                if not is_integer(value) or value < 0:
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
                if not is_integer(value) or value < 0:
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
