"""Endpoints of your own: any POST under /v3/ or /v1/ that no built-in route claims runs the graph
the request names (its JSON `model`, its form's `model`, or the rest of the path), as OVMS does.

One server, no model: the graphs are the user calculators in endpoint_calcs.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

HERE = Path(__file__).parent
GRAPHS = {
    "echo": "EchoCalculator",
    "created": "CreatedCalculator",
    "refusing": "RefusingCalculator",
    "ovms_style": "OvmsStyleCalculator",
}
COUNTDOWN = """
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {
  name: "countdown"
  calculator: "endpoint_calcs:CountdownCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: { tag_index: 'LOOPBACK:0', back_edge: true }
}
"""


def one_node_graph(calculator: str) -> str:
    return f"""
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {{
  calculator: "endpoint_calcs:{calculator}"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
}}
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, launch_exact: LaunchExact) -> Iterator[Any]:
    root = tmp_path_factory.mktemp("custom_endpoints")
    graphs = {name: one_node_graph(calculator) for name, calculator in GRAPHS.items()}
    graphs["countdown"] = COUNTDOWN
    for name, text in graphs.items():
        (root / name).mkdir()
        (root / name / "graph.pbtxt").write_text(text)
    config = {
        "model_config_list": [],
        "mediapipe_config_list": [{"name": n, "base_path": str(root / n)} for n in graphs],
    }
    (root / "config.json").write_text(json.dumps(config))
    args = ["--config_path", str(root / "config.json"), "--python_path", str(HERE)]
    with launch_exact(args, model="echo") as running:
        yield running


def http(server: ExactServer) -> httpx.Client:
    return httpx.Client(base_url=server.base_url, timeout=30)


def test_a_json_body_names_its_graph(server: ExactServer) -> None:
    with http(server) as client:
        for prefix in ("/v3", "/v1"):
            sent = {"model": "echo", "anything": [1, 2]}
            reply = client.post(f"{prefix}/my/own/endpoint?x=1", json=sent)
            assert reply.status_code == 200, reply.text
            seen = reply.json()
            assert seen["uri"] == f"{prefix}/my/own/endpoint?x=1"
            assert seen["method"] == "POST"
            assert seen["json"] == sent
            assert json.loads(seen["body"]) == sent


def test_the_path_names_the_graph_when_the_body_is_not_json(server: ExactServer) -> None:
    with http(server) as client:
        reply = client.post(
            "/v3/echo", content=b"plain words", headers={"Content-Type": "text/plain"}
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["body"] == "plain words"
        assert reply.json()["json"] is None
        # an empty `model` falls back to the path too, as OVMS does
        reply = client.post("/v3/echo", json={"model": "", "q": 1})
        assert reply.json()["json"] == {"model": "", "q": 1}


def test_a_form_names_its_graph(server: ExactServer) -> None:
    with http(server) as client:
        files = {"upload": ("a.bin", b"12345", "application/octet-stream")}
        reply = client.post("/v3/upload", data={"model": "echo", "note": "hi"}, files=files)
        assert reply.status_code == 200, reply.text
        assert reply.json()["form"] == {"model": ["echo"], "note": ["hi"], "upload": ["a.bin:5"]}


def test_any_content_type_status_and_headers(server: ExactServer) -> None:
    with http(server) as client:
        reply = client.post("/v3/make", json={"model": "created"})
        assert reply.status_code == 201
        assert reply.headers["content-type"].startswith("text/plain")
        assert reply.headers["x-made-by"] == "graph"
        assert reply.content == b"made it"


def test_errors_come_back_in_openai_shape(server: ExactServer) -> None:
    with http(server) as client:
        refused = client.post("/v3/ask", json={"model": "refusing"})
        assert refused.status_code == 400
        assert refused.json()["error"]["message"] == "the answer is no"
        assert refused.json()["error"]["param"] == "question"
        crashed = client.post("/v3/ask", json={"model": "refusing", "crash": True})
        assert crashed.status_code == 500
        assert crashed.json()["error"]["type"] == "server_error"
        assert "request id" in crashed.json()["error"]["message"]
        missing = client.post("/v3/ask", json={"model": "nobody"})
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "model_not_found"
        # the built-in routes take precedence: theirs is a JSON body, whatever the content type
        plain = {"Content-Type": "text/plain"}
        builtin = client.post("/v3/chat/completions", content=b"hi", headers=plain)
        assert builtin.status_code == 400
        assert "not valid JSON" in builtin.json()["error"]["message"]
        config = client.get("/v1/config")
        assert config.status_code == 200 and "echo" in config.json()


def sse(response: httpx.Response) -> Iterator[Any]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            yield "[DONE]" if data == "[DONE]" else json.loads(data)


def test_a_calculator_streams_over_its_loopback_cycle(server: ExactServer) -> None:
    with http(server) as client:
        body = {"model": "countdown", "count": 3}
        with client.stream("POST", "/v3/countdown", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = list(sse(response))
    assert events == [
        {"type": "tick", "left": 2},
        {"type": "tick", "left": 1},
        {"type": "tick", "left": 0},
        {"type": "liftoff"},
    ]


def test_a_failure_mid_stream_ends_it_with_an_error_event(server: ExactServer) -> None:
    with http(server) as client:
        body = {"model": "countdown", "count": 5, "fail_at": 2}
        with client.stream("POST", "/v3/countdown", json=body) as response:
            events = list(sse(response))
    assert events[:2] == [{"type": "tick", "left": 4}, {"type": "tick", "left": 3}]
    assert events[2]["error"]["message"] == "counted too far"
    assert len(events) == 3


def test_a_disconnect_reaches_the_graph(server: ExactServer, tmp_path: Path) -> None:
    marker = tmp_path / "ended.json"
    body = {"model": "countdown", "count": 200, "delay": 0.05, "marker": str(marker)}
    with http(server) as client, client.stream("POST", "/v3/countdown", json=body) as response:
        events = sse(response)
        assert next(events) == {"type": "tick", "left": 199}
        assert next(events) == {"type": "tick", "left": 198}
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ended = json.loads(marker.read_text())
    assert ended["disconnected"] is True
    assert 2 <= ended["sent"] < 200


def test_ovms_bytes_stream_only_where_ovms_streams(server: ExactServer) -> None:
    with http(server) as client:
        body = {"model": "ovms_style", "stream": True}
        with client.stream("POST", "/v3/my/completions", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            assert list(sse(response)) == [{"n": 1}, {"n": 2}, "[DONE]"]
        # OVMS streams bytes only for completions/responses paths; elsewhere they are one body
        whole = client.post("/v3/my/completions", json={"model": "ovms_style"})
        assert whole.json() == {"n": 0}


def test_only_post_reaches_a_graph(server: ExactServer) -> None:
    with http(server) as client:
        assert client.get("/v3/echo").status_code == 405
