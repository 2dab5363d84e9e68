"""`graphrt serve --config_path config.json`: OVMS's mediapipe_config_list, end to end.

One server serves four entries of one config.json (in a directory other than the server's working
directory, so relative paths must be resolved against the file): two good graphs of the same GGUF
(the tiny random llama) under different names (one with the default graph_path, one with its
own) and two broken ones (an unknown calculator, a models_path that does not exist). The good ones
serve; the broken ones are UNAVAILABLE with their reasons and refuse requests with 503; the
server as a whole is not ready. A config.json with a schema error stops `graphrt serve` at once
with exit code 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    import subprocess

    from conftest import ExactServer, LaunchExact

GOOD = ("alpha", "beta")
UNKNOWN_CALCULATOR = "unknown-calculator"
MISSING_MODEL = "missing-model"
BROKEN = (UNKNOWN_CALCULATOR, MISSING_MODEL)
BETA_MAX_TOKENS_LIMIT = 8
ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]


def _states(http: httpx.Client) -> dict[str, str]:
    config = http.get("/v1/config").json()
    return {name: entry["model_version_status"][0]["state"] for name, entry in config.items()}


def _settled(http: httpx.Client) -> bool:
    states = _states(http)
    return set(states) == {*GOOD, *BROKEN} and all(
        state in ("AVAILABLE", "UNAVAILABLE") for state in states.values()
    )


@pytest.fixture(scope="module")
def repository(
    tiny_llm_gguf: Path,
    tmp_path_factory: pytest.TempPathFactory,
    make_llm_graph: Callable[..., str],
) -> Path:
    """config.json and its servables; returns the config file."""
    root = tmp_path_factory.mktemp("repository") / "ovms"
    (root / "models").mkdir(parents=True)
    os.symlink(tiny_llm_gguf, root / "models" / tiny_llm_gguf.name)
    model = f"../models/{tiny_llm_gguf.name}"
    files = {
        "alpha/graph.pbtxt": make_llm_graph(model),
        "beta/beta_graph.pbtxt": make_llm_graph(model, max_tokens_limit=BETA_MAX_TOKENS_LIMIT),
        f"{UNKNOWN_CALCULATOR}/graph.pbtxt": make_llm_graph(model, calculator="NoSuchCalculator"),
        f"{MISSING_MODEL}/graph.pbtxt": make_llm_graph("../models/no-such-model.gguf"),
    }
    for relative, text in files.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    config = {
        "model_config_list": [],
        "mediapipe_config_list": [
            {"name": "alpha", "base_path": "alpha"},  # graph_path: <base_path>/graph.pbtxt
            {"name": "beta", "base_path": "beta", "graph_path": "beta_graph.pbtxt"},
            {"name": UNKNOWN_CALCULATOR},  # base_path: <config dir>/<name>
            {"name": MISSING_MODEL, "base_path": MISSING_MODEL},
        ],
    }
    path = root / "config.json"
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def config_server(repository: Path, launch_exact: LaunchExact) -> Iterator[ExactServer]:
    # Never ready (two servables are broken): wait until every servable has settled instead.
    with launch_exact(["--config_path", str(repository)], wait_ready=False) as running:
        running.wait_for(_settled, "all servables to load or fail")
        yield running


@pytest.fixture(scope="module")
def config_client(config_server: ExactServer) -> Iterator[openai.OpenAI]:
    with config_server.client() as sdk:
        yield sdk


def _status_error(call: Callable[[], object], status: int) -> dict[str, Any]:
    """The OpenAI error object of a refused SDK call."""
    with pytest.raises(openai.APIStatusError) as caught:
        call()
    assert caught.value.status_code == status, caught.value.body
    body = caught.value.body
    assert isinstance(body, dict), body
    assert {"message", "type", "param", "code"} <= set(body), body
    return body


# ------------------------------------------------------------------------------ two graphs


def test_both_graphs_answer_under_their_names(config_client: openai.OpenAI) -> None:
    answers = {}
    for name in GOOD:
        reply = config_client.chat.completions.create(
            model=name, messages=ITALY, temperature=0, max_tokens=6
        )
        assert reply.model == name
        content = reply.choices[0].message.content
        assert content, reply
        answers[name] = content
    # The same GGUF, greedy: the same words under either name.
    assert answers["alpha"] == answers["beta"]


def test_each_name_runs_its_own_graph_file(config_client: openai.OpenAI) -> None:
    """beta's graph_path file sets max_tokens_limit; alpha's default graph.pbtxt does not."""
    error = _status_error(
        lambda: config_client.chat.completions.create(
            model="beta", messages=ITALY, max_tokens=BETA_MAX_TOKENS_LIMIT
        ),
        400,
    )
    assert error["param"] == "max_tokens"
    assert str(BETA_MAX_TOKENS_LIMIT) in error["message"]
    reply = config_client.chat.completions.create(
        model="alpha", messages=ITALY, max_tokens=BETA_MAX_TOKENS_LIMIT
    )
    assert reply.usage is not None and reply.usage.completion_tokens >= 1


@pytest.mark.parametrize("prefix", ["/v3", "/v1"])
def test_model_list_names_the_available_graphs(config_server: ExactServer, prefix: str) -> None:
    with config_server.client(prefix) as sdk:
        assert sorted(model.id for model in sdk.models.list()) == sorted(GOOD)
        assert sdk.models.retrieve("beta").id == "beta"
    with config_server.http() as http:
        body = http.get(f"{prefix}/models").json()
    assert body["object"] == "list"
    assert [entry["id"] for entry in body["data"]] == sorted(GOOD)
    for entry in body["data"]:
        assert entry["object"] == "model"
        assert isinstance(entry["created"], int)
        assert isinstance(entry["owned_by"], str)


def test_config_status_has_ovms_shape(config_server: ExactServer) -> None:
    with config_server.http() as http:
        response = http.get("/v1/config")
    assert response.status_code == 200
    config = response.json()
    assert set(config) == {*GOOD, *BROKEN}
    for name in GOOD:
        assert config[name] == {
            "model_version_status": [
                {
                    "version": "1",
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": "OK"},
                }
            ]
        }


def test_model_ready(config_server: ExactServer) -> None:
    with config_server.http() as http:
        for name in GOOD:
            assert http.get(f"/v2/models/{name}/ready").status_code == 200
            assert http.get(f"/v2/models/{name}/versions/1/ready").status_code == 200
        for name in BROKEN:
            assert http.get(f"/v2/models/{name}/ready").status_code == 503
        assert http.get("/v2/models/no-such-model/ready").status_code == 404


def test_unknown_model_is_404(config_client: openai.OpenAI) -> None:
    error = _status_error(
        lambda: config_client.chat.completions.create(model="gamma", messages=ITALY, max_tokens=3),
        404,
    )
    assert error["param"] == "model"
    assert error["code"] == "model_not_found"
    assert "gamma" in error["message"]


# ---------------------------------------------------------------------------- broken graphs


@pytest.mark.parametrize(
    ("name", "reason"),
    [(UNKNOWN_CALCULATOR, "NoSuchCalculator"), (MISSING_MODEL, "no-such-model.gguf")],
)
def test_broken_servable_is_unavailable_with_its_reason(
    config_server: ExactServer, config_client: openai.OpenAI, name: str, reason: str
) -> None:
    with config_server.http() as http:
        status = http.get("/v1/config").json()[name]["model_version_status"]
    assert len(status) == 1
    assert status[0]["state"] == "UNAVAILABLE"
    assert status[0]["status"]["error_code"] != "OK"
    assert reason in status[0]["status"]["error_message"]

    error = _status_error(
        lambda: config_client.chat.completions.create(model=name, messages=ITALY, max_tokens=3), 503
    )
    assert name in error["message"]
    assert reason in error["message"]


def test_broken_servable_makes_the_server_not_ready_but_live(config_server: ExactServer) -> None:
    with config_server.http() as http:
        assert http.get("/v2/health/ready").status_code == 503
        assert http.get("/v2/health/live").status_code == 200


def test_broken_servables_are_logged(config_server: ExactServer) -> None:
    log = config_server.log()
    assert "NoSuchCalculator" in log
    assert "no-such-model.gguf" in log


# ------------------------------------------------------------------------------ schema errors


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (
            '{"model_config_list": [], "mediapipe_config_list": [{"name": "a", "graph_pth": "x"}]}',
            "graph_pth",
        ),
        ('{"model_config_list": [], "monitorng": {}}', "monitorng"),
        ('{"mediapipe_config_list": []}', "model_config_list"),
        ('{"model_config_list": [], "mediapipe_config_list": [{"name": 3}]}', "name"),
        ('{"model_config_list": [', "JSON"),
    ],
    ids=["unknown-entry-key", "unknown-top-level-key", "missing-key", "wrong-type", "bad-json"],
)
def test_schema_error_stops_serve(
    tmp_path: Path,
    run_graphrt: Callable[..., subprocess.CompletedProcess[str]],
    text: str,
    named: str,
) -> None:
    config = tmp_path / "config.json"
    config.write_text(text, encoding="utf-8")
    result = run_graphrt(
        "serve", "--rest_port", "0", "--config_path", str(config), cwd=tmp_path, timeout=60
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert str(config) in output
    assert named in output
    assert "Traceback" not in output
