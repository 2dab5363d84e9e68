"""Output constraints: request forms, and the checks that keep bad grammars from the engine.

Which grammars the engine really compiles is tested end to end (tests/e2e/test_agents.py); here
each check is shown to refuse what XGrammar would refuse or silently ignore, and to let the
schemas real clients send (pydantic's, OpenAI's examples) through unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from servables.errors import InvalidRequest
from servables.llm.grammar_check import check_ebnf, check_json_schema, check_regex
from servables.openai.structured_output import JSON_OBJECT_SCHEMA, parse_constraint

PYDANTIC_SCHEMA: dict[str, Any] = {
    "$defs": {
        "Color": {"enum": ["red", "green"], "title": "Color", "type": "string"},
        "Pet": {
            "properties": {"name": {"title": "Name", "type": "string"}},
            "required": ["name"],
            "title": "Pet",
            "type": "object",
        },
    },
    "properties": {
        "name": {"title": "Name", "type": "string"},
        "age": {"minimum": 0, "title": "Age", "type": "integer"},
        "color": {"$ref": "#/$defs/Color"},
        "pets": {"items": {"$ref": "#/$defs/Pet"}, "title": "Pets", "type": "array"},
        "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
    },
    "required": ["name", "age", "color", "pets"],
    "title": "Person",
    "type": "object",
}


def refusal(schema: Any) -> str:
    with pytest.raises(InvalidRequest) as info:
        check_json_schema(schema, "response_format.json_schema.schema")
    assert info.value.param == "response_format.json_schema.schema"
    return info.value.message


def test_real_client_schemas_pass() -> None:
    check_json_schema(PYDANTIC_SCHEMA, "p")
    check_json_schema({"type": ["string", "null"], "format": "date-time"}, "p")
    check_json_schema(JSON_OBJECT_SCHEMA, "p")
    check_json_schema(True, "p")


@pytest.mark.parametrize(
    ("schema", "fragment"),
    [
        ({"type": "object", "properties": {"a": {"not": {"type": "null"}}}}, "'not'"),
        ({"type": "array", "uniqueItems": True}, "'uniqueItems'"),
        ({"type": "integer", "multipleOf": 3}, "'multipleOf'"),
        ({"if": {"type": "string"}, "then": {"minLength": 1}}, "'if'"),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, "exactly one"),
        ({"$ref": "https://example.com/s.json"}, "only references inside"),
        ({"$ref": "#/$defs/Missing"}, "does not resolve"),
        ({"anyOf": [{"type": "string"}], "minLength": 2}, "'minLength'"),
        ({"type": "string", "pattern": "a+", "maxLength": 3}, "pattern cannot be combined"),
        ({"type": "string", "pattern": "(?<=a)b"}, "lookbehind"),
        ({"type": "integer", "minimum": 5, "maximum": 1}, "greater than the maximum"),
        ({"type": "integer", "minimum": 1.5}, "whole number"),
        ({"type": "array", "minItems": 3, "maxItems": 1}, "minItems is greater"),
        ({"type": "money"}, "unknown type"),
        (False, "must be a JSON schema object"),
        ({"properties": {"a": False}}, "accepts no value"),
        ([1], "must be a JSON schema object"),
    ],
)
def test_schemas_the_engine_would_not_enforce_are_refused(schema: Any, fragment: str) -> None:
    assert fragment in refusal(schema)


@pytest.mark.parametrize("pattern", ["[0-9]{3}-[a-z]+", "(yes|no)", r"\d+\.\d*", "a{2,}b?", "x*?"])
def test_regexes_the_engine_compiles_pass(pattern: str) -> None:
    check_regex(pattern, "guided_regex")


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("(unclosed", "not a valid regular expression"),
        ("(?=a)b", "lookahead"),
        (r"(a)\1", "backreferences"),
        (r"\bword", "word boundaries"),
        ("(?i)abc", "inline flags"),
        ("a{", "repetition"),
        ("a**", "not a valid regular expression"),
        ("[]a]", "starting with ']'"),
        (5, "must be a string"),
    ],
)
def test_regexes_the_engine_refuses_are_refused(pattern: Any, fragment: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_regex(pattern, "guided_regex")
    assert fragment in info.value.message
    assert info.value.param == "guided_regex"


def test_ebnf_grammars() -> None:
    check_ebnf('root ::= "A" [0-9]+ item?\nitem ::= ("x" | "y"){1,3} # comment', "g")
    for grammar, fragment in [
        ('item ::= "x"', "no `root` rule"),
        ('root ::= item "x"', "'item' (line 1) is not defined"),
        ('root ::= "x"\nroot ::= "y"', "defined twice"),
        ('root ::= ("x"', "expected ')'"),
        ('root ::= "x" (= "y")', "unexpected text"),
        ("root ::= [\\d]", "inside a character class"),
        ("", "non-empty"),
    ]:
        with pytest.raises(InvalidRequest) as info:
            check_ebnf(grammar, "guided_grammar")
        assert fragment in info.value.message, grammar


def test_request_forms() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    rf = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}
    constraint = parse_constraint({"response_format": rf})
    assert constraint is not None and constraint.kind == "json_schema"
    assert json.loads(constraint.text) == schema
    obj = parse_constraint({"response_format": {"type": "json_object"}})
    assert obj is not None and json.loads(obj.text) == JSON_OBJECT_SCHEMA
    assert parse_constraint({"response_format": {"type": "text"}}) is None
    assert parse_constraint({}) is None
    choice = parse_constraint({"guided_choice": ["yes", 'say "no"']})
    assert choice is not None and choice.engine_fields() == {
        "grammar": 'root ::= "yes" | "say \\"no\\""'
    }
    regex = parse_constraint({"structured_outputs": {"regex": "[a-z]+"}})
    assert regex is not None and regex.engine_fields() == {"regex": "[a-z]+"}
    json_text = parse_constraint({"guided_json": json.dumps(schema)})
    assert json_text is not None and json.loads(json_text.text) == schema


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"response_format": "json"}, "response_format"),
        ({"response_format": {"type": "xml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
        ({"guided_json": "{not json"}, "guided_json"),
        ({"guided_choice": []}, "guided_choice"),
        ({"structured_outputs": {"regex": "a", "choice": ["b"]}}, "structured_outputs"),
        ({"guided_regex": "a", "response_format": {"type": "json_object"}}, "guided_regex"),
    ],
)
def test_bad_request_forms_name_the_field(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_constraint(body)
    assert info.value.param == param


# Grammars that passed these checks but made the engine's step raise (openvino-genai 2026.4.1,
# /tmp/rv/gcands.py in the review of the grammar checks); each must now be a 400 naming the field.
ENGINE_FAILURES: list[tuple[str, Any, str]] = [
    ("regex", "(?P<n>a)", "named groups"),
    ("regex", "a||b", "empty alternatives"),
    ("regex", "|a", "empty alternatives"),
    ("regex", "a|", "empty alternatives"),
    ("regex", "(|a)", "empty alternatives"),
    ("regex", "a++", "possessive"),
    ("regex", "a*+", "possessive"),
    ("regex", "a{2}+", "possessive"),
    # Compiles, but as "\0" then "12" where Python (and the client) mean a newline.
    ("regex", r"\012", "octal"),
    ("regex", r"[\012]", "octal"),
    ("grammar", "root ::= [z-a]", "reversed"),
    ("grammar", r'root ::= "\q"', r"escape \q"),
    ("grammar", 'root ::= "a"{5,2}', "minimum is greater than its maximum"),
    ("grammar", r"root ::= [\q]", r"escape \q"),
    ("grammar", r'root ::= "\u12"', "4 hex digits"),
    ("grammar", r'root ::= "\x"', "hex digits"),
    ("grammar", r'root ::= "\/"', r"escape \/"),
    ("grammar", r'root ::= "\U00110000"', "not a Unicode character"),
    ("grammar", 'root ::= "a" b ::= "c"', "new line"),
    (
        "json_schema",
        {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 6},
        "no integer",
    ),
    ("json_schema", {"type": "integer", "minimum": 5, "exclusiveMaximum": 5}, "minimum"),
    ("json_schema", {"type": "integer", "minimum": 1e30}, "outside the range"),
    ("json_schema", {"type": "integer", "minimum": -1e20, "maximum": 1e20}, "outside the range"),
    ("json_schema", {"type": "integer", "maximum": 1 << 63}, "outside the range"),
    ("json_schema", {"type": "integer", "minimum": float(1 << 63)}, "outside the range"),
    ("json_schema", {"type": "integer", "exclusiveMinimum": (1 << 63) - 1}, "leaves no integer"),
    ("json_schema", {"type": "integer", "maximum": float("inf")}, "finite"),
    ("json_schema", {"type": "array", "minItems": 100000}, "minItems (100000)"),
    ("json_schema", {"type": "array", "minItems": 1}, "give `items` a schema"),
    ("json_schema", {"type": "array", "items": False, "minItems": 1}, "minItems (1)"),
    (
        "json_schema",
        {"type": "array", "prefixItems": [{"type": "string"}], "items": False, "minItems": 3},
        "prefixItems has (1)",
    ),
    (
        "json_schema",
        {"type": "object", "minProperties": 2, "additionalProperties": False},
        "minProperties (2)",
    ),
    ("json_schema", {"type": "object", "minProperties": 1}, "give additionalProperties a schema"),
    (
        "json_schema",
        {"type": "object", "properties": {"a": {"type": "integer"}}, "minProperties": 2},
        "minProperties (2)",
    ),
]


def check_as(kind: str, value: Any, param: str) -> None:
    if kind == "regex":
        check_regex(value, param)
    elif kind == "grammar":
        check_ebnf(value, param)
    else:
        check_json_schema(value, param)


@pytest.mark.parametrize(("kind", "value", "fragment"), ENGINE_FAILURES, ids=lambda v: str(v)[:40])
def test_grammars_that_broke_an_engine_step_are_refused(
    kind: str, value: Any, fragment: str
) -> None:
    with pytest.raises(InvalidRequest) as info:
        check_as(kind, value, "structured_outputs")
    assert fragment in info.value.message, info.value.message
    assert info.value.param == "structured_outputs"


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        ("regex", "(a)*?"),
        ("regex", "a{2}?"),
        ("regex", "(?:a|b)c"),
        ("grammar", r'root ::= "\x4" "\e" [\]\-] [+--] "\U0001F600"'),
        ("grammar", "root ::= x.y\nx.y ::= [a-a]"),
        ("json_schema", {"type": "integer", "minimum": (1 << 63) - 1}),
        ("json_schema", {"type": "integer", "minimum": -(1 << 63), "maximum": 1 << 60}),
        ("json_schema", {"type": "integer", "minimum": 1e18}),
        ("json_schema", {"type": "integer", "exclusiveMinimum": 5, "exclusiveMaximum": 7}),
        ("json_schema", {"type": "array", "items": {"type": "integer"}, "minItems": 100000}),
        ("json_schema", {"type": "array", "unevaluatedItems": True, "minItems": 2}),
        ("json_schema", {"type": "object", "minProperties": 2, "additionalProperties": {}}),
        ("json_schema", {"type": "object", "minProperties": 1, "patternProperties": {"^x": {}}}),
    ],
    ids=lambda v: str(v)[:40],
)
def test_edge_cases_the_engine_compiles_pass(kind: str, value: Any) -> None:
    check_as(kind, value, "structured_outputs")
