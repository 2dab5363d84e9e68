"""Fuzzing the OpenAI routes with requests generated from OpenAI's own request schemas.

A server of its own, on the tiny random llama (tests/conftest.py) with `--max_tokens_limit 1`,
so a valid request costs little and thousands of cases fit in the suite. Whatever the body, the
server must answer: never a 5xx, every 4xx an OpenAI error object, every stream free of server
errors; and it must be healthy afterwards. Bodies name the served model in 9 cases of 10 (else
whatever was generated), so most cases get past the model lookup into validation and generation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, Fuzzer, LaunchExact

MODEL = "smollm2"


@pytest.fixture(scope="module")
def fuzzed(tiny_llm_gguf: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    # The tiny random llama with SmolLM2's tokenizer and template: the same server machinery
    # at a twentieth of the cost per case (long fuzzed prompts are mostly prefill).
    args = ["--model_path", str(tiny_llm_gguf), "--model_name", MODEL, "--max_tokens_limit", "1"]
    with launch_exact(args, model=MODEL) as server:
        yield server


def openapi(schemas: dict[str, Any]) -> dict[str, Any]:
    def operation(root: str) -> dict[str, Any]:
        body = {"schema": {"$ref": f"#/components/schemas/{root}"}}
        return {
            "post": {
                "requestBody": {"required": True, "content": {"application/json": body}},
                "responses": {"200": {"description": "a completion"}},
            }
        }

    return {
        "openapi": "3.1.0",
        "info": {"title": "graphrt OpenAI routes", "version": "1"},
        "paths": {
            "/v3/chat/completions": operation("CreateChatCompletionRequest"),
            "/v3/completions": operation("CreateCompletionRequest"),
        },
        "components": schemas["components"],
    }


def name_the_model(case: Any, dice: int) -> None:
    if isinstance(case.body, dict) and dice < 9:
        case.body["model"] = MODEL


def content_type(response: Any) -> str:
    """schemathesis keeps each header as a list of values."""
    values = response.headers.get("content-type") or [""]
    return str(values[0])


def check_openai_answer(case: Any, response: Any) -> None:
    status = response.status_code
    sent = json.dumps(case.body, default=str)[:2000]
    assert status < 500, f"{status} for {sent}:\n{response.text[:2000]}"
    if status >= 400:
        error = response.json()["error"]
        assert isinstance(error["message"], str) and error["message"], response.text
        assert error["type"] == "invalid_request_error" and "param" in error and "code" in error
    elif content_type(response).startswith("text/event-stream"):
        assert "server_error" not in response.text, f"a stream failed for {sent}:\n{response.text}"
        assert response.text.rstrip().endswith("data: [DONE]")
    else:
        assert response.json()["object"] in ("chat.completion", "text_completion")


@pytest.mark.parametrize("path", ["/v3/chat/completions", "/v3/completions"])
def test_fuzzed_requests_never_break_the_server(
    path: str,
    fuzzed: ExactServer,
    fuzzer: Callable[[str, dict[str, Any]], Fuzzer],
    openai_request_schemas: dict[str, Any],
) -> None:
    report = fuzzer(fuzzed.base_url, openapi(openai_request_schemas)).run(
        path, check_openai_answer, name_the_model
    )
    print(f"{path}: {report}")
    assert 200 in report.statuses, "no case reached generation"
    with fuzzed.http() as http:
        assert http.get("/v2/health/ready").status_code == 200
        answer = http.post(
            path,
            json={"model": MODEL, "messages": [{"role": "user", "content": "Hi"}]}
            if path.endswith("chat/completions")
            else {"model": MODEL, "prompt": "Hi"},
        )
        assert answer.status_code == 200, answer.text
