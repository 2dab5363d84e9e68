"""Extract the OpenAI response schemas the tests validate against from OpenAI's OpenAPI document.

    python tools/extract_openai_schemas.py PATH/TO/openai-openapi.yaml
    python tools/extract_openai_schemas.py PATH/TO/openai-openapi.yaml --out FILE

Writes tests/fixtures/openai_schemas.json (unless --out says otherwise): the root schemas below and
every schema they `$ref`, transitively, under `components.schemas`, so `#/components/schemas/X`
references resolve against the written document. The spec is OpenAPI 3.1 but still marks some
schemas `nullable: true` (an OpenAPI 3.0 keyword JSON Schema ignores); those become
`anyOf: [schema, {type: null}]` so that a standard Draft 2020-12 validator enforces what the spec
means. Annotations (descriptions, examples, `x-*` vendor keys) are dropped to keep the file small.

The tests read only the JSON, so they never need the (3 MB) YAML; PyYAML is needed only here.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "tests" / "fixtures" / "openai_schemas.json"
ROOT_SCHEMAS = (
    "CreateChatCompletionResponse",
    "CreateChatCompletionStreamResponse",
    "CreateCompletionResponse",
    "ErrorResponse",
    "ListModelsResponse",
    "Model",
    "Response",
    "ResponseStreamEvent",
)
REF_PREFIX = "#/components/schemas/"
# Keywords whose value is a map of names to schemas (the names must not be transformed).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose value is data, not a schema.
DATA_KEYWORDS = ("enum", "const", "default", "required", "discriminator", "format", "type")
ANNOTATIONS = ("description", "example", "examples", "title", "$comment")


def convert(schema: Any) -> Any:
    """A copy of `schema` without annotations and with `nullable: true` made Draft 2020-12."""
    if isinstance(schema, list):
        return [convert(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ANNOTATIONS or key.startswith("x-") or key == "nullable":
            continue
        if key in SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: convert(sub) for name, sub in value.items()}
        elif key in DATA_KEYWORDS:
            result[key] = value
        else:
            result[key] = convert(value)
    if schema.get("nullable") is True:
        return {"anyOf": [result, {"type": "null"}]}
    return result


def refs(schema: Any) -> Iterator[str]:
    """Every `$ref` value in a schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key in SCHEMA_MAPS and isinstance(value, dict):
                for sub in value.values():
                    yield from refs(sub)
            elif key not in DATA_KEYWORDS:
                yield from refs(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from refs(item)


def extract(spec: dict[str, Any], roots: tuple[str, ...] = ROOT_SCHEMAS) -> dict[str, Any]:
    """The document to write: `roots` and their transitive references, converted."""
    available = spec["components"]["schemas"]
    selected: dict[str, Any] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in selected:
            continue
        if name not in available:
            raise SystemExit(f"schema {name!r} is not in components.schemas")
        selected[name] = convert(available[name])
        for ref in refs(selected[name]):
            if not ref.startswith(REF_PREFIX):
                raise SystemExit(f"schema {name!r} has a non-local reference {ref!r}")
            pending.append(ref[len(REF_PREFIX) :])
    return {
        "info": {
            "generated_by": "tools/extract_openai_schemas.py",
            "openapi": spec.get("openapi"),
            "spec_version": spec.get("info", {}).get("version"),
            "roots": list(roots),
        },
        "components": {"schemas": dict(sorted(selected.items()))},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path, help="OpenAI's openapi.yaml")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"default: {DEFAULT_OUT}")
    args = parser.parse_args(argv)
    # Imported by name: PyYAML ships no type stubs, and only this tool needs it.
    yaml = importlib.import_module("yaml")
    spec = yaml.safe_load(args.spec.read_text(encoding="utf-8"))
    document = extract(spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    count = len(document["components"]["schemas"])
    print(f"wrote {count} schemas to {args.out}")


if __name__ == "__main__":
    main()
