"""Embedding one JSON schema inside a larger one without breaking its local `$ref`s.

A tool's parameters schema may refer to its own parts (`{"$ref": "#/$defs/Loc"}`); `#` is the
root of the document the schema is, so once the schema sits inside a bigger one (a list of
calls, each with a name and arguments) those pointers resolve against the wrong root. The schema
moves to the outer document's `$defs` under its own key, with its pointers rebased there, and is
referred to from where it sits (XGrammar follows object keys in a pointer, not `anyOf`
positions, so `$defs` is the one place it can live).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["embed_schema", "has_ref", "rebase_refs"]


def rebase_refs(schema: Any, base: str) -> Any:
    """A copy of `schema` whose local `$ref`s point into it at `base` inside a larger schema."""
    if isinstance(schema, list):
        return [rebase_refs(item, base) for item in schema]
    if not isinstance(schema, dict):
        return schema
    copy: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "$ref" and isinstance(value, str) and value.startswith("#"):
            copy[key] = base + value[1:]
        elif key in ("enum", "const", "default", "examples"):
            copy[key] = value
        else:
            copy[key] = rebase_refs(value, base)
    return copy


def has_ref(schema: Any) -> bool:
    if isinstance(schema, dict):
        return "$ref" in schema or any(has_ref(value) for value in schema.values())
    if isinstance(schema, list):
        return any(has_ref(item) for item in schema)
    return False


def embed_schema(
    schema: Mapping[str, Any], key: str, definitions: dict[str, Any]
) -> Mapping[str, Any]:
    """`schema` to place inside a larger schema whose `$defs` will be `definitions`.

    Without local references it is returned as is; with them it is added to `definitions` under
    `key` (rebased) and a `{"$ref": "#/$defs/<key>"}` to it is returned instead.
    """
    if not has_ref(schema):
        return schema
    definitions[key] = rebase_refs(schema, f"#/$defs/{key}")
    return {"$ref": f"#/$defs/{key}"}
