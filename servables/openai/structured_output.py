"""Read the request fields that constrain the output's form into one `OutputConstraint`.

OpenAI's `response_format` (`text`, `json_object`, `json_schema`) and the forms vLLM clients send:
`structured_outputs: {json | regex | choice | grammar | structural_tag}` and the older
`guided_json` / `guided_regex` / `guided_choice` / `guided_grammar`. At most one may be given.
Every grammar is checked (servables/llm/grammar_check.py) before the request is accepted, since
the engine cannot refuse a bad one without breaking.

The engine enforces the constraint while it decodes (openvino-genai's StructuredOutputConfig with
XGrammar), whatever `strict` says: a schema is always followed exactly.
"""

from __future__ import annotations

import json
from typing import Any

from servables.errors import InvalidRequest
from servables.llm.grammar_check import check_ebnf, check_regex
from servables.llm.request import OutputConstraint, json_schema_constraint

__all__ = ["JSON_OBJECT_SCHEMA", "OutputConstraint", "parse_constraint"]

# `json_object`: any JSON object. XGrammar's schemas are strict (no properties beyond those
# listed), so the extra properties must be allowed explicitly.
JSON_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": True}

VLLM_GUIDED = {
    "guided_json": "json",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
}
CONSTRAINT_FIELDS = ("response_format", "structured_outputs", *VLLM_GUIDED)


def _response_format(value: Any) -> OutputConstraint | None:
    param = "response_format"
    if not isinstance(value, dict):
        raise InvalidRequest("response_format is not an object", param=param)
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return json_schema_constraint(JSON_OBJECT_SCHEMA, param)
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, dict):
            raise InvalidRequest(
                "response_format.json_schema must be an object with a 'schema'",
                param="response_format.json_schema",
            )
        name = spec.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidRequest(
                "response_format.json_schema.name must be a string",
                param="response_format.json_schema.name",
            )
        strict = spec.get("strict")
        if strict is not None and not isinstance(strict, bool):
            raise InvalidRequest(
                "response_format.json_schema.strict must be a boolean",
                param="response_format.json_schema.strict",
            )
        schema = spec.get("schema", True)
        return json_schema_constraint(schema, "response_format.json_schema.schema")
    raise InvalidRequest(
        "response_format.type must be 'text', 'json_object' or 'json_schema'",
        param="response_format.type",
    )


def choice_grammar(choices: Any, param: str) -> str:
    """An EBNF grammar whose only sentences are the given strings."""
    if (
        not isinstance(choices, list)
        or not choices
        or not all(isinstance(choice, str) and choice for choice in choices)
    ):
        raise InvalidRequest(f"{param} must be a non-empty array of non-empty strings", param=param)
    # A JSON string literal is a valid EBNF string literal in XGrammar's syntax.
    alternatives = " | ".join(json.dumps(choice, ensure_ascii=False) for choice in choices)
    return f"root ::= {alternatives}"


def _vllm_form(kind: str, value: Any, param: str) -> OutputConstraint:
    if kind == "json":
        return json_schema_constraint(value, param)
    if kind == "regex":
        check_regex(value, param)
        return OutputConstraint("regex", value, param)
    if kind == "choice":
        return OutputConstraint("grammar", choice_grammar(value, param), param)
    if kind == "grammar":
        check_ebnf(value, param)
        return OutputConstraint("grammar", value, param)
    raise InvalidRequest(f"{param} is not supported", param=param)


def _structured_outputs(value: Any) -> OutputConstraint | None:
    param = "structured_outputs"
    if not isinstance(value, dict):
        raise InvalidRequest("structured_outputs is not an object", param=param)
    given = [key for key in ("json", "regex", "choice", "grammar") if value.get(key) is not None]
    unsupported = [
        key for key in ("structural_tag", "json_object") if value.get(key) not in (None, False)
    ]
    if unsupported:
        raise InvalidRequest(
            f"structured_outputs.{unsupported[0]} is not supported; use json, regex, choice or "
            "grammar",
            param=f"structured_outputs.{unsupported[0]}",
        )
    if value.get("json_object") is True:
        given.append("json_object")
    if len(given) > 1:
        raise InvalidRequest(
            "structured_outputs may set only one of json, regex, choice and grammar", param=param
        )
    if not given:
        return None
    if given[0] == "json_object":
        return json_schema_constraint(JSON_OBJECT_SCHEMA, param)
    return _vllm_form(given[0], value[given[0]], f"structured_outputs.{given[0]}")


def parse_constraint(body: dict[str, Any]) -> OutputConstraint | None:
    """The request's output constraint, checked; None when the output is free text."""
    given = [name for name in CONSTRAINT_FIELDS if body.get(name) is not None]
    if len(given) > 1:
        raise InvalidRequest(
            f"only one of {', '.join(given)} may be given: each constrains the whole output",
            param=given[1],
        )
    if not given:
        return None
    name = given[0]
    if name == "response_format":
        return _response_format(body[name])
    if name == "structured_outputs":
        return _structured_outputs(body[name])
    return _vllm_form(VLLM_GUIDED[name], body[name], name)
