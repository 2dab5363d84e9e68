"""API keys and restricted CORS, end to end.

Two servers: one takes its key from --api_key_file (first line of the file) and allows a single
origin; the other takes its key from the API_KEY environment variable and exposes /metrics with
--metrics_list. OpenAI routes need `Authorization: Bearer <key>` (401 with OpenAI's error object
otherwise); health, status and metrics routes need no key. Both serve the tiny random llama:
what is checked is who may ask, not what the model answers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

FILE_KEY = "file-key-7f3a"
ENV_KEY = "env-key-19c2"
ALLOWED = "https://allowed.example"
OTHER = "https://other.example"
ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
CHAT = {"model": "keyed", "messages": ITALY, "max_tokens": 3}


@pytest.fixture(scope="module")
def file_keyed(
    tiny_llm_gguf: Path, tmp_path_factory: pytest.TempPathFactory, launch_exact: LaunchExact
) -> Iterator[ExactServer]:
    key_file = tmp_path_factory.mktemp("secrets") / "api_key.txt"
    key_file.write_text(f"{FILE_KEY}\nnot-the-key\n", encoding="utf-8")
    args = [
        "--model_path",
        str(tiny_llm_gguf),
        "--model_name",
        "keyed",
        "--api_key_file",
        str(key_file),
        "--allowed_origins",
        ALLOWED,
        "--metrics_enable",
    ]
    # API_KEY in the environment too: the file wins.
    with launch_exact(args, model="keyed", env={"API_KEY": "ignored-env-key"}) as server:
        yield server


@pytest.fixture(scope="module")
def env_keyed(tiny_llm_gguf: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    args = [
        "--model_path",
        str(tiny_llm_gguf),
        "--model_name",
        "keyed",
        "--metrics_enable",
        "--metrics_list",
        "ovms_requests_success",
    ]
    with launch_exact(args, model="keyed", env={"API_KEY": ENV_KEY}) as server:
        yield server


def sdk(server: ExactServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url + "/v3", api_key=key, max_retries=0, timeout=120.0
    )


def assert_unauthorized(response: httpx.Response) -> None:
    assert response.status_code == 401, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"message", "type", "param", "code"} <= set(error), error
    assert error["type"] == "invalid_request_error"
    assert error["code"] == "invalid_api_key"
    assert error["message"]


def openai_requests(http: httpx.Client, headers: dict[str, str]) -> list[httpx.Response]:
    return [
        http.post("/v3/chat/completions", json=CHAT, headers=headers),
        http.post("/v1/chat/completions", json=CHAT, headers=headers),
        http.post(
            "/v3/completions",
            json={"model": "keyed", "prompt": "Rome is", "max_tokens": 3},
            headers=headers,
        ),
        http.get("/v3/models", headers=headers),
        http.get("/v1/models/keyed", headers=headers),
    ]


@pytest.mark.parametrize(
    ("server_fixture", "key"), [("file_keyed", FILE_KEY), ("env_keyed", ENV_KEY)]
)
def test_openai_routes_need_the_key(
    request: pytest.FixtureRequest, server_fixture: str, key: str
) -> None:
    server: ExactServer = request.getfixturevalue(server_fixture)
    wrong = {
        "none": {},
        "wrong": {"Authorization": "Bearer wrong"},
        "not bearer": {"Authorization": key},
        "second line of the file": {"Authorization": "Bearer not-the-key"},
        "the environment's key when a file is given": {"Authorization": "Bearer ignored-env-key"},
    }
    if server_fixture == "env_keyed":
        del wrong["second line of the file"], wrong["the environment's key when a file is given"]
    with server.http() as http:
        for what, headers in wrong.items():
            for response in openai_requests(http, headers):
                assert response.status_code == 401, (what, response.request.url, response.text)
                assert_unauthorized(response)
        for response in openai_requests(http, {"Authorization": f"Bearer {key}"}):
            assert response.status_code == 200, (response.request.url, response.text)


@pytest.mark.parametrize(
    ("server_fixture", "key"), [("file_keyed", FILE_KEY), ("env_keyed", ENV_KEY)]
)
def test_openai_sdk_with_and_without_the_key(
    request: pytest.FixtureRequest, server_fixture: str, key: str
) -> None:
    server: ExactServer = request.getfixturevalue(server_fixture)
    with sdk(server, "wrong") as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            client.chat.completions.create(model="keyed", messages=ITALY, max_tokens=3)
        body: Any = caught.value.body
        assert body["code"] == "invalid_api_key"
        assert body["type"] == "invalid_request_error"
        with pytest.raises(openai.AuthenticationError):
            client.models.list()
    with sdk(server, key) as client:
        reply = client.chat.completions.create(model="keyed", messages=ITALY, max_tokens=3)
        assert reply.choices[0].message.content
        stream = client.chat.completions.create(
            model="keyed", messages=ITALY, max_tokens=3, stream=True
        )
        assert "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)


@pytest.mark.parametrize("server_fixture", ["file_keyed", "env_keyed"])
def test_health_status_and_metrics_need_no_key(
    request: pytest.FixtureRequest, server_fixture: str
) -> None:
    server: ExactServer = request.getfixturevalue(server_fixture)
    with server.http() as http:
        for path in (
            "/v2/health/live",
            "/v2/health/ready",
            "/v2/models/keyed/ready",
            "/v1/config",
            "/metrics",
        ):
            assert http.get(path).status_code == 200, path


# ------------------------------------------------------------------------------------- CORS


def test_cors_allows_only_the_allowed_origin(file_keyed: ExactServer) -> None:
    preflight = {"Access-Control-Request-Method": "POST"}
    authorized = {"Authorization": f"Bearer {FILE_KEY}"}
    with file_keyed.http() as http:
        # Preflights carry no credentials: no key needed for them.
        allowed = http.options("/v3/chat/completions", headers={"Origin": ALLOWED, **preflight})
        other = http.options("/v3/chat/completions", headers={"Origin": OTHER, **preflight})
        allowed_get = http.get("/v3/models", headers={"Origin": ALLOWED, **authorized})
        other_get = http.get("/v3/models", headers={"Origin": OTHER, **authorized})
        # The browser must be able to read a 401 to show it.
        refused = http.get("/v3/models", headers={"Origin": ALLOWED})

    assert allowed.status_code == 204
    assert allowed.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert allowed.headers["Access-Control-Allow-Methods"]
    assert allowed.headers["Access-Control-Allow-Headers"]
    assert "Access-Control-Allow-Origin" not in other.headers

    assert allowed_get.status_code == 200
    assert allowed_get.headers["Access-Control-Allow-Origin"] == ALLOWED
    assert other_get.status_code == 200  # CORS is for browsers; the server still answers
    assert "Access-Control-Allow-Origin" not in other_get.headers

    assert_unauthorized(refused)
    assert refused.headers["Access-Control-Allow-Origin"] == ALLOWED


# ------------------------------------------------------------------------- --metrics_list


def test_metrics_list_selects_ovms_metrics(env_keyed: ExactServer) -> None:
    with sdk(env_keyed, ENV_KEY) as client:
        client.chat.completions.create(model="keyed", messages=ITALY, max_tokens=3)
    with env_keyed.http() as http:
        response = http.get("/metrics")
    assert response.status_code == 200
    families = {family.name for family in text_string_to_metric_families(response.text)}
    assert {name for name in families if name.startswith("ovms_")} == {"ovms_requests_success"}
    for name in (
        "graphrt_llm_time_to_first_token_seconds",
        "graphrt_llm_generated_tokens",
        "graphrt_llm_kv_cache_usage_ratio",
    ):
        assert name in families, sorted(families)
    assert (
        'ovms_requests_success{api="V3",interface="REST",method="Unary",name="keyed"} '
        in response.text
    )


def test_rag_routes_need_the_key(env_keyed: ExactServer) -> None:
    """Embeddings and rerank routes are guarded like the OpenAI ones, and /v2/rerank answers in
    Cohere's shape. With the key the request reaches the model (a 400: `keyed` is an LLM)."""
    body = {"model": "keyed", "input": "x", "query": "q", "documents": ["d"]}
    with env_keyed.http() as http:
        for path in ("/v3/embeddings", "/v1/embeddings", "/v3/rerank", "/v1/rerank"):
            assert_unauthorized(http.post(path, json=body))
        cohere = http.post("/v2/rerank", json=body)
        assert cohere.status_code == 401 and set(cohere.json()) == {"message"}, cohere.text
        allowed = http.post(
            "/v3/embeddings", json=body, headers={"Authorization": f"Bearer {ENV_KEY}"}
        )
    assert allowed.status_code == 400, allowed.text
