"""Structural tags that make the engine write tool calls in a family's own format.

XGrammar's triggered tags (openvino-genai `StructuredOutputConfig.structural_tags_config`, given
as JSON text): generation is free until a trigger string appears, then the matching tag's begin
text, a body constrained by the tool's JSON schema and the end text are enforced. This is what
OVMS's `enable_tool_guided_generation` and `tool_choice: "required"` do, with the same begin and
end texts per family, so the output parses with the same family's parser.

Families without a grammar: qwen3coder and minicpm5 (their arguments are XML, not JSON),
lfm2, gemma4 and onyx (not JSON either), and gptoss (its markers are special tokens, which
XGrammar cannot require).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from servables.llm.output_parsers.registry import tool_schemas, validate_parser_names
from servables.llm.output_parsers.schema_refs import embed_schema

__all__ = ["tool_call_structural_tag"]

# A tool without a parameters schema still takes a JSON object.
_ANY_OBJECT: Mapping[str, Any] = {"type": "object"}


def _schema(parameters: Mapping[str, Any]) -> Mapping[str, Any]:
    return parameters if parameters else _ANY_OBJECT


def _tag(begin: str, schema: Mapping[str, Any], end: str) -> dict[str, Any]:
    return {
        "type": "tag",
        "begin": begin,
        "content": {"type": "json_schema", "json_schema": dict(schema)},
        "end": end,
    }


def _name(name: str) -> str:
    """The name as the begin text quotes it (a JSON string's inside)."""
    return json.dumps(name, ensure_ascii=False)[1:-1]


def _hermes3(schemas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    tags = [
        _tag(
            f'<tool_call>\n{{"name": "{_name(name)}", "arguments": ',
            _schema(schema),
            "}\n</tool_call>",
        )
        for name, schema in schemas.items()
    ]
    return ["<tool_call>"], tags


def _llama3(schemas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    tags = [
        _tag(f'{{"name": "{_name(name)}", "parameters": ', _schema(schema), "}")
        for name, schema in schemas.items()
    ]
    return ['{"name":'], tags


def _mistral(schemas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    tags = [
        _tag(f'[TOOL_CALLS][{{"name": "{_name(name)}", "arguments": ', _schema(schema), "}]")
        for name, schema in schemas.items()
    ]
    return ["[TOOL_CALLS]"], tags


def _devstral(schemas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    tags = [
        _tag(f"[TOOL_CALLS]{name}[ARGS]", _schema(schema), "") for name, schema in schemas.items()
    ]
    return ["[TOOL_CALLS]"], tags


def _phi4(schemas: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    # One tag whose body is the whole list, so that several calls fit in one `functools[...]`.
    # Each tool's schema sits inside that list: its local `$ref`s must still resolve there.
    definitions: dict[str, Any] = {}
    calls = [
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": [name]},
                "arguments": embed_schema(_schema(schema), f"tool_{index}_parameters", definitions),
            },
            "required": ["name", "arguments"],
        }
        for index, (name, schema) in enumerate(schemas.items())
    ]
    body: dict[str, Any] = {"type": "array", "items": {"anyOf": calls}, "minItems": 1}
    if definitions:
        body["$defs"] = definitions
    return ["functools"], [_tag("functools", body, "")]


_BUILDERS: dict[
    str, Callable[[Mapping[str, Mapping[str, Any]]], tuple[list[str], list[dict[str, Any]]]]
] = {
    "hermes3": _hermes3,
    "llama3": _llama3,
    "mistral": _mistral,
    "devstral": _devstral,
    "phi4": _phi4,
}


def tool_call_structural_tag(
    tool_parser: str,
    tools: Sequence[Mapping[str, Any]],
    *,
    require_call: bool,
    single_call: bool = False,
) -> dict[str, Any] | None:
    """The structural-tag document for `tools` in `tool_parser`'s format, or None.

    Returns `{"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": [...],
    "tags": [...], "at_least_one": require_call, "stop_after_first": single_call}}`; pass
    `json.dumps(...)` as `StructuredOutputConfig.structural_tags_config`. `require_call` forces
    at least one call (tool_choice "required" or a named function: pass only that tool). None for
    families without a grammar, and when `tools` is empty. Output generated under it parses with
    the same family's parser.

    `single_call` (`parallel_tool_calls: false`) sets `stop_after_first`: generation ends with
    the first call.
    """
    validate_parser_names(tool_parser, None)
    builder = _BUILDERS.get(tool_parser)
    schemas = tool_schemas(tools)
    if builder is None or not schemas:
        return None
    triggers, tags = builder(schemas)
    return {
        "type": "structural_tag",
        "format": {
            "type": "triggered_tags",
            "triggers": triggers,
            "tags": tags,
            "at_least_one": require_call,
            "stop_after_first": single_call,
        },
    }
