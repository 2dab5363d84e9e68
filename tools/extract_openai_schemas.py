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

`--requests` writes the request schemas the fuzz tests generate from instead
(tests/fixtures/openai_request_schemas.json), made cheap to generate without leaving the spec's
language: object `allOf`s are merged into one object (their properties and required keys), and
every array holds at most 2 items, every free string at most 24 characters and every free-form
object at most 2 keys. Without those bounds one chat request took ~0.3 s to generate; with them
thousands of cases fit in the test suite. Formats, patterns, enums and ranges are kept.
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
    "CreateEmbeddingResponse",
    "CreateTranscriptionResponseJson",
    "CreateTranscriptionResponseVerboseJson",
    "CreateTranslationResponseJson",
    "CreateTranslationResponseVerboseJson",
    "ErrorResponse",
    "ImageEditCompletedEvent",
    "ImageEditPartialImageEvent",
    "ImageGenCompletedEvent",
    "ImageGenPartialImageEvent",
    "ImagesResponse",
    "ListModelsResponse",
    "Model",
    "Response",
    "ResponseStreamEvent",
    "SpeechAudioDeltaEvent",
    "SpeechAudioDoneEvent",
    "TranscriptTextDeltaEvent",
    "TranscriptTextDoneEvent",
)
REF_PREFIX = "#/components/schemas/"
# Keywords whose value is a map of names to schemas (the names must not be transformed).
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# Keywords whose value is data, not a schema.
DATA_KEYWORDS = ("enum", "const", "default", "required", "discriminator", "format", "type")
ANNOTATIONS = ("description", "example", "examples", "title", "$comment")
REQUEST_ROOTS = (
    "CreateChatCompletionRequest",
    "CreateCompletionRequest",
    "CreateEmbeddingRequest",
    "CreateImageEditRequest",
    "CreateTranscriptionRequest",
    "CreateTranslationRequest",
)
REQUESTS_OUT = ROOT / "tests" / "fixtures" / "openai_request_schemas.json"
MAX_ITEMS, MAX_LENGTH, MAX_FREE_PROPERTIES = 2, 24, 2


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


def merge_all_of(schema: Any, schemas: dict[str, Any]) -> Any:
    """`allOf` of plain object schemas (or references to them) merged into one object."""
    if isinstance(schema, list):
        return [merge_all_of(item, schemas) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {
        key: value if key in DATA_KEYWORDS else merge_all_of(value, schemas)
        for key, value in schema.items()
    }
    parts = result.pop("allOf", None)
    if parts is None:
        return result
    resolved = [
        merge_all_of(schemas[part["$ref"][len(REF_PREFIX) :]], schemas)
        if set(part) == {"$ref"}
        else part
        for part in parts
    ]
    plain = {"type", "properties", "required", "additionalProperties"}
    if not all(part.get("type", "object") == "object" and set(part) <= plain for part in resolved):
        result["allOf"] = parts
        return result
    properties = dict(result.get("properties", {}))
    required = list(result.get("required", []))
    for part in resolved:
        properties.update(part.get("properties", {}))
        required += [name for name in part.get("required", []) if name not in required]
    result.update(type="object", properties=properties)
    if required:
        result["required"] = required
    return result


def bounded(schema: Any) -> Any:
    """A copy of `schema` with small arrays, strings and free-form objects (see the docstring)."""
    if isinstance(schema, list):
        return [bounded(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result: dict[str, Any] = {}
    for key, value in schema.items():
        if key in SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: bounded(sub) for name, sub in value.items()}
        elif key in DATA_KEYWORDS or key == "pattern":
            result[key] = value
        else:
            result[key] = bounded(value)
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds or "items" in schema:
        result["maxItems"] = max(
            schema.get("minItems", 0), min(schema.get("maxItems", 9), MAX_ITEMS)
        )
    if "string" in kinds and not {"enum", "pattern", "format"} & set(schema):
        result["maxLength"] = max(
            schema.get("minLength", 0), min(schema.get("maxLength", MAX_LENGTH), MAX_LENGTH)
        )
    free_object = "object" in kinds or "additionalProperties" in schema
    if free_object and not schema.get("properties"):
        result["maxProperties"] = min(schema.get("maxProperties", 9), MAX_FREE_PROPERTIES)
    return result


def request_schemas(spec: dict[str, Any]) -> dict[str, Any]:
    """The request schemas of the fuzz tests, merged and bounded (see the docstring)."""
    document = extract(spec, REQUEST_ROOTS)
    schemas = document["components"]["schemas"]
    document["components"]["schemas"] = {
        name: bounded(merge_all_of(schema, schemas)) for name, schema in schemas.items()
    }
    document["info"]["transformed"] = "allOf merged; arrays, strings, free objects bounded"
    return document


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("spec", type=Path, help="OpenAI's openapi.yaml")
    parser.add_argument("--out", type=Path, help=f"default: {DEFAULT_OUT} ({REQUESTS_OUT})")
    parser.add_argument(
        "--requests", action="store_true", help="write the bounded request schemas instead"
    )
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = REQUESTS_OUT if args.requests else DEFAULT_OUT
    # Imported by name: PyYAML ships no type stubs, and only this tool needs it.
    yaml = importlib.import_module("yaml")
    spec = yaml.safe_load(args.spec.read_text(encoding="utf-8"))
    document = request_schemas(spec) if args.requests else extract(spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(document, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    count = len(document["components"]["schemas"])
    print(f"wrote {count} schemas to {args.out}")


if __name__ == "__main__":
    main()
