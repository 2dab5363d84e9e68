"""`graphrt serve` with no model arguments, end to end: the embedded default model, and what a
server gets without flags: CORS open to every origin, no /metrics, and (with --log_level DEBUG)
a log line per request besides the periodic engine usage line.

GRAPHRT_CACHE comes from the session fixture `smollm2_gguf`, so the server finds the GGUF it
cached and downloads nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

DEFAULT_NAME = "SmolLM2-135M-Instruct"
ORIGIN = "https://app.example"
ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
USAGE_LINE = re.compile(
    r" INFO .*All requests: (\d+); Scheduled requests: (\d+); Cache usage ([\d.]+)%"
)


@pytest.fixture(scope="module")
def default_server(smollm2_gguf: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    with launch_exact(["--log_level", "DEBUG"], model=DEFAULT_NAME) as server:
        yield server


def test_serves_the_default_model_by_its_name(
    default_server: ExactServer, smollm2_gguf: Path
) -> None:
    with default_server.client() as sdk:
        assert [model.id for model in sdk.models.list()] == [DEFAULT_NAME]
        reply = sdk.chat.completions.create(model=DEFAULT_NAME, messages=ITALY, max_tokens=8)
    assert reply.model == DEFAULT_NAME
    assert reply.choices[0].message.content
    with default_server.http() as http:
        assert http.get(f"/v2/models/{DEFAULT_NAME}/ready").status_code == 200
    log = default_server.log()
    assert str(smollm2_gguf) in log  # the cached file, not a fresh download
    assert "fetching the default model" not in log


def test_the_gguf_is_loaded_from_its_saved_graph(
    default_server: ExactServer, smollm2_gguf: Path
) -> None:
    """genai builds a GGUF's graph at every load unless given the graph it saved: the engine
    loads that, made at the file's first load and kept in the cache for the file."""
    (saved,) = re.findall(
        r"loading openvino-genai's graph of it, saved in (\S+)", default_server.log()
    )
    source = (Path(saved) / "source.txt").read_text(encoding="utf-8").split("\n")[0]
    assert Path(source) == smollm2_gguf.resolve()
    assert (Path(saved) / "openvino_model.xml").is_file()
    assert (Path(saved) / "openvino_model.bin").stat().st_size > smollm2_gguf.stat().st_size // 2


# ------------------------------------------------------------------------------------- CORS


def test_cors_preflight_is_answered(default_server: ExactServer) -> None:
    with default_server.http() as http:
        response = http.options(
            "/v3/chat/completions",
            headers={
                "Origin": ORIGIN,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "content-type, authorization",
            },
        )
    assert response.status_code == 204, response.text
    assert response.headers["Access-Control-Allow-Origin"] in ("*", ORIGIN)
    assert response.headers["Access-Control-Allow-Methods"]
    assert response.headers["Access-Control-Allow-Headers"]


def test_cors_headers_on_responses(default_server: ExactServer) -> None:
    with default_server.http() as http:
        models = http.get("/v3/models", headers={"Origin": ORIGIN})
        chat = http.post(
            "/v3/chat/completions",
            headers={"Origin": ORIGIN},
            json={"model": DEFAULT_NAME, "messages": ITALY, "max_tokens": 3},
        )
    for response in (models, chat):
        assert response.status_code == 200, response.text
        assert response.headers.get("Access-Control-Allow-Origin") in ("*", ORIGIN), (
            response.request.url,
            dict(response.headers),
        )


def test_cors_headers_on_error_responses(default_server: ExactServer) -> None:
    """A browser can read an OpenAI error only if the error response carries the header too."""
    with default_server.http() as http:
        invalid = http.post(
            "/v3/chat/completions",
            headers={"Origin": ORIGIN},
            json={"model": DEFAULT_NAME, "messages": ITALY, "max_tokens": -1},
        )
        missing = http.post(
            "/v3/chat/completions",
            headers={"Origin": ORIGIN},
            json={"model": "no-such-model", "messages": ITALY, "max_tokens": 3},
        )
    for response, status in ((invalid, 400), (missing, 404)):
        assert response.status_code == status, response.text
        assert "error" in response.json()
        assert response.headers.get("Access-Control-Allow-Origin") in ("*", ORIGIN), (
            status,
            dict(response.headers),
        )


def test_cors_headers_on_streamed_responses(default_server: ExactServer) -> None:
    """A browser reading a stream needs the header as much as one reading a JSON body."""
    body = {"model": DEFAULT_NAME, "messages": ITALY, "max_tokens": 3, "stream": True}
    with (
        default_server.http() as http,
        http.stream("POST", "/v3/chat/completions", headers={"Origin": ORIGIN}, json=body) as sse,
    ):
        assert sse.status_code == 200
        assert sse.headers["content-type"].startswith("text/event-stream")
        headers = dict(sse.headers)
        sse.read()
    assert headers.get("access-control-allow-origin") in ("*", ORIGIN), headers


def test_metrics_are_off_by_default(default_server: ExactServer) -> None:
    with default_server.http() as http:
        assert http.get("/metrics").status_code == 404


# ------------------------------------------------------------------------------------ logging


def test_debug_log_has_a_line_per_request(default_server: ExactServer) -> None:
    with default_server.client() as sdk:
        start = len(default_server.log())
        sdk.chat.completions.create(model=DEFAULT_NAME, messages=ITALY, max_tokens=4)
        sdk.completions.create(model=DEFAULT_NAME, prompt="The capital of Italy is", max_tokens=4)
    default_server.wait_for(
        lambda _: (
            len(
                [
                    line
                    for line in default_server.log()[start:].splitlines()
                    if " DEBUG " in line and DEFAULT_NAME in line and "request" in line
                ]
            )
            >= 2
        ),
        "a DEBUG line for each request",
        timeout=10,
    )


def test_busy_engine_logs_its_usage(default_server: ExactServer) -> None:
    """The usage line comes at most every 5 s while the engine is busy (docs/operations.md,
    "Metrics"), so the stream asks for more tokens than 5 s produce and is dropped once the line
    is there."""
    body = {
        "model": DEFAULT_NAME,
        "messages": [{"role": "user", "content": "Tell me a long story about a dragon."}],
        "max_tokens": 2000,
        "ignore_eos": True,
        "stream": True,
    }
    start = len(default_server.log())
    busy: list[tuple[int, int, float]] = []
    with (
        default_server.http() as http,
        http.stream("POST", "/v3/chat/completions", json=body) as sse,
    ):
        assert sse.status_code == 200
        for line in sse.iter_lines():
            assert line != "data: [DONE]", "the stream ended before the usage line appeared"
            for match in USAGE_LINE.finditer(default_server.log()[start:]):
                requests, scheduled = int(match[1]), int(match[2])
                if requests >= 1:
                    busy.append((requests, scheduled, float(match[3])))
            if busy:
                break
    assert busy, (
        "no `All requests: N; Scheduled requests: M; Cache usage X%` line while busy:\n"
        + (default_server.log()[start:])
    )
    requests, scheduled, usage = busy[0]
    assert requests == 1
    assert scheduled <= requests
    assert 0.0 <= usage <= 100.0
