"""Fuzzing /v3/embeddings (OpenAI's request schema) and /v3/rerank (Cohere's, written here) on
the RAG server: whatever the body, never a 5xx, every 4xx an OpenAI error object, every 200 a
well-formed answer, and the server healthy afterwards. Bodies name the served model in 9 cases
of 10, so most cases get past the model lookup into validation and inference.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, Fuzzer

CASES = 300  # per endpoint: inputs are bounded to two items of 24 characters, so cases are cheap
MODELS = {"/v3/embeddings": "minilm", "/v3/rerank": "reranker"}
# Cohere's rerank request (v1 and v2 fields), bounded like the OpenAI schemas.
RERANK_REQUEST = {
    "type": "object",
    "required": ["model", "query", "documents"],
    "properties": {
        "model": {"type": "string", "maxLength": 24},
        "query": {"type": "string", "maxLength": 24},
        "documents": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "items": {
                "oneOf": [
                    {"type": "string", "maxLength": 24},
                    {
                        "type": "object",
                        "required": ["text"],
                        "properties": {"text": {"type": "string", "maxLength": 24}},
                    },
                ]
            },
        },
        "top_n": {"type": "integer"},
        "return_documents": {"type": "boolean"},
        "max_chunks_per_doc": {"type": "integer"},
        "max_tokens_per_doc": {"type": "integer"},
        "rank_fields": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
    },
}


def openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    def operation(schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "post": {
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": schema}},
                },
                "responses": {"200": {"description": "an answer"}},
            }
        }

    return {
        "openapi": "3.1.0",
        "info": {"title": "graphrt RAG routes", "version": "1"},
        "paths": {
            "/v3/embeddings": operation({"$ref": "#/components/schemas/CreateEmbeddingRequest"}),
            "/v3/rerank": operation(RERANK_REQUEST),
        },
        "components": schemas["components"],
    }


def checker(path: str) -> Callable[[Any, Any], None]:
    def check(case: Any, response: Any) -> None:
        status = response.status_code
        sent = json.dumps(case.body, default=str)[:2000]
        assert status < 500, f"{status} for {sent}:\n{response.text[:2000]}"
        body = response.json()
        if status >= 400:
            error = body["error"]
            assert isinstance(error["message"], str) and error["message"], response.text
            assert error["type"] == "invalid_request_error" and "param" in error
        elif path == "/v3/embeddings":
            assert body["object"] == "list" and len(body["data"]) >= 1, response.text
        else:
            assert isinstance(body["results"], list) and body["results"], response.text

    return check


@pytest.mark.parametrize("path", sorted(MODELS))
def test_fuzzed_requests_never_break_the_rag_server(
    path: str,
    rag_server: ExactServer,
    fuzzer: Callable[[str, dict[str, Any]], Fuzzer],
    openai_request_schemas: dict[str, Any],
) -> None:
    def name_the_model(case: Any, dice: int) -> None:
        if isinstance(case.body, dict) and dice < 9:
            case.body["model"] = MODELS[path]

    report = fuzzer(rag_server.base_url, openapi(openai_request_schemas)).run(
        path, checker(path), name_the_model, cases=CASES
    )
    print(f"{path}: {report}")
    assert 200 in report.statuses, "no case reached inference"
    with rag_server.http() as http:
        assert http.get("/v2/health/ready").status_code == 200
