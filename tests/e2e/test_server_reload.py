"""Hot reload of config.json by polling (--file_system_poll_wait_seconds 1), end to end.

The server starts with one servable, `base`. Editing config.json adds a servable (it loads and
serves without any request to the server), removes one while a stream to it is open (the stream
runs to its end, new requests get 404 at once), and an invalid config.json changes nothing (the
servables keep serving; the log and POST /v1/config/reload say what is wrong and where).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import ExactServer, GraphRepository, LaunchExact

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]
# Long enough to outlast the poller's next look (1 s) at the tiny llama's speed.
STREAM_TOKENS = 2000


def states(http: httpx.Client) -> dict[str, str]:
    config = http.get("/v1/config").json()
    return {name: entry["model_version_status"][0]["state"] for name, entry in config.items()}


def wait_for_states(server: ExactServer, expected: dict[str, str], timeout: float = 90.0) -> None:
    server.wait_for(lambda http: states(http) == expected, f"/v1/config == {expected}", timeout)


def stream_body(model: str, max_tokens: int = STREAM_TOKENS) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a long story about a dragon."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def data_lines(response: httpx.Response) -> AsyncIterator[str]:
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield line[len("data:") :].strip()


def assert_complete_stream(payloads: Sequence[str], max_tokens: int) -> None:
    """A stream that ran to max_tokens: no error frame, usage, finish_reason length, [DONE]."""
    assert payloads[-1] == "[DONE]", payloads[-3:]
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert not [chunk for chunk in chunks if "error" in chunk]
    assert chunks[-1]["usage"]["completion_tokens"] == max_tokens
    reasons = [choice["finish_reason"] for chunk in chunks for choice in chunk["choices"]]
    assert reasons[-1] == "length"


@pytest.fixture(scope="module")
def repository(graph_repository: Callable[[str], GraphRepository]) -> GraphRepository:
    return graph_repository("polled")


@pytest.fixture(scope="module")
def polled(repository: GraphRepository, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    # A removed or replaced servable drains its open streams for up to --shutdown_timeout; a
    # slow (shared) machine must not turn the drain into a cut.
    args = [
        "--config_path",
        str(repository.config),
        "--file_system_poll_wait_seconds",
        "1",
        "--shutdown_timeout",
        "600",
    ]
    with launch_exact(args) as server:
        yield server


def test_added_servable_loads_and_serves(polled: ExactServer, repository: GraphRepository) -> None:
    repository.serve(["base", "added"])
    wait_for_states(polled, {"base": "AVAILABLE", "added": "AVAILABLE"})

    with polled.client() as sdk:
        reply = sdk.chat.completions.create(model="added", messages=ITALY, max_tokens=5)
        assert reply.model == "added"
        assert reply.choices[0].message.content
        assert sorted(model.id for model in sdk.models.list()) == ["added", "base"]
    with polled.http() as http:
        # Already applied by the poller: an explicit reload finds nothing to do.
        response = http.post("/v1/config/reload")
        assert response.status_code == 200, response.text
        assert set(response.json()) == {"base", "added"}
        assert http.get("/v2/health/ready").status_code == 200
    assert "configuration reloaded" in polled.log()


async def test_removed_servable_finishes_its_open_stream(
    polled: ExactServer, repository: GraphRepository
) -> None:
    repository.serve(["base", "added"])
    wait_for_states(polled, {"base": "AVAILABLE", "added": "AVAILABLE"})
    async with (
        httpx.AsyncClient(base_url=polled.base_url, timeout=120.0) as ahttp,
        ahttp.stream("POST", "/v3/chat/completions", json=stream_body("added")) as response,
    ):
        assert response.status_code == 200
        lines = data_lines(response)
        before = [await lines.__anext__() for _ in range(3)]

        repository.serve(["base"])
        wait_for_states(polled, {"base": "AVAILABLE"})
        # The name is gone at once, while the old copy still streams to its client.
        gone = await ahttp.post(
            "/v3/chat/completions",
            json={"model": "added", "messages": ITALY, "max_tokens": 3},
        )
        assert gone.status_code == 404, gone.text
        assert gone.json()["error"]["code"] == "model_not_found"

        after = [line async for line in lines]
    # The removal happened mid-stream (else this test proves nothing).
    assert len(after) > 10, after
    assert_complete_stream(before + after, STREAM_TOKENS)

    with polled.client() as sdk:
        with pytest.raises(openai.NotFoundError):
            sdk.chat.completions.create(model="added", messages=ITALY, max_tokens=3)
        assert [model.id for model in sdk.models.list()] == ["base"]
    with polled.http() as http:
        assert http.get("/v2/models/added/ready").status_code == 404


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('{"model_config_list": [], "mediapipe_config_list": [', "is not valid JSON"),
        # Applied, this would unload everything: it must not be.
        ('{"model_config_list": [], "mediapipe_config_list": [], "bogus": 1}', "'bogus'"),
    ],
    ids=["bad-json", "unknown-top-level-key"],
)
def test_invalid_config_changes_nothing(
    polled: ExactServer, repository: GraphRepository, text: str, named: str
) -> None:
    repository.serve(["base"])
    wait_for_states(polled, {"base": "AVAILABLE"})
    log_before = len(polled.log())

    repository.write(text)
    # The poller reports it...
    polled.wait_for(
        lambda _: named in polled.log()[log_before:], f"the poller to log {named}", timeout=15
    )
    logged = polled.log()[log_before:]
    assert str(repository.config) in logged
    # ... an explicit reload refuses it, naming the file and the problem ...
    with polled.http() as http:
        response = http.post("/v1/config/reload")
        assert response.status_code == 400, response.text
        message = response.json()["error"]
        assert str(repository.config) in message
        assert named in message
        # ... and the servables are untouched.
        assert states(http) == {"base": "AVAILABLE"}
        assert http.get("/v2/health/ready").status_code == 200
    with polled.client() as sdk:
        reply = sdk.chat.completions.create(model="base", messages=ITALY, max_tokens=3)
        assert reply.choices[0].message.content

    repository.serve(["base"])
    with polled.http() as http:
        response = http.post("/v1/config/reload")
        assert response.status_code == 200, response.text  # nothing was ever changed


def test_ovms_config_management_changes_a_running_server(
    polled: ExactServer, repository: GraphRepository
) -> None:
    """`graphrt --add_to_config` / `--remove_from_config`, as OVMS's, on a served config.json:
    the entry goes to model_config_list and the server's poll picks it up."""
    import subprocess
    import sys

    repository.serve(["base"])
    wait_for_states(polled, {"base": "AVAILABLE"})

    def manage(*flags: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "graphrt.cli.main", *flags,
             "--config_path", str(repository.config), "--model_name", "managed"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr

    manage("--add_to_config", "--model_path", "added")
    entries = json.loads(repository.config.read_text())["model_config_list"]
    assert entries == [{"config": {"name": "managed", "base_path": "added"}}]
    wait_for_states(polled, {"base": "AVAILABLE", "managed": "AVAILABLE"})
    with polled.client() as sdk:
        assert sdk.chat.completions.create(model="managed", messages=ITALY, max_tokens=3)
    manage("--remove_from_config")
    wait_for_states(polled, {"base": "AVAILABLE"})
