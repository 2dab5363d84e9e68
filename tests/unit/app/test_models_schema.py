"""/v1/models bodies and mapped error bodies validate against OpenAI's published schemas.

Same schema file as tests/unit/servables/test_responses_schema.py (see there for how it is made).
"""

from __future__ import annotations

import importlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from graphrt.error_map import to_client_error
from graphrt.http.model_routes import model_entry
from graphruntime.errors import CalculatorError, GraphRunError
from servables.errors import InvalidRequest, ModelNotFound, ServableLoadError
from servables.openai.bodies import error_body

SCHEMAS_FILE = Path(__file__).resolve().parents[2] / "fixtures" / "openai_schemas.json"
# Imported by name: jsonschema ships no type stubs (types-jsonschema is not a test dependency).
jsonschema: Any = importlib.import_module("jsonschema")


@cache
def _validator(name: str) -> Any:
    document = json.loads(SCHEMAS_FILE.read_text(encoding="utf-8"))
    schema = {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
    return jsonschema.Draft202012Validator(schema)


def assert_valid(name: str, body: Any) -> None:
    decoded = json.loads(json.dumps(body))
    problems = [
        f"{'/'.join(map(str, error.absolute_path)) or '<root>'}: {error.message}"
        for error in _validator(name).iter_errors(decoded)
    ]
    assert not problems, f"{name} violations:\n" + "\n".join(problems)


def test_model_entry() -> None:
    entry = model_entry("smollm2", 1_700_000_000.7)
    assert_valid("Model", entry)
    assert entry == {
        "id": "smollm2",
        "object": "model",
        "created": 1_700_000_000,
        "owned_by": "graphrt",
    }


def test_model_list() -> None:
    body = {"object": "list", "data": [model_entry("a", 1.0), model_entry("b", 2.0)]}
    assert_valid("ListModelsResponse", body)
    assert_valid("ListModelsResponse", {"object": "list", "data": []})


def test_validator_is_live() -> None:
    assert list(_validator("Model").iter_errors({"id": "x", "object": "model"}))


@pytest.mark.parametrize(
    "error",
    [
        InvalidRequest("bad temperature", param="temperature"),
        ModelNotFound("The model `x` does not exist.", param="model"),
        ServableLoadError("loading"),
        GraphRunError([CalculatorError("LLMExecutor", "Process", InvalidRequest("bad"))]),
        RuntimeError("internal"),
    ],
    ids=["invalid", "not-found", "not-ready", "graph", "internal"],
)
def test_mapped_error_bodies(error: BaseException) -> None:
    failure = to_client_error(error)
    assert_valid(
        "ErrorResponse",
        error_body(failure.message, failure.error_type, failure.param, failure.code),
    )
