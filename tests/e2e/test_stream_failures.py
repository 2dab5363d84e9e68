"""A graph that fails mid-stream ends each API's stream the way that API's clients expect.

The graph here is OVMS's LLM graph on the tiny random llama (the failure's path is checked, not
the answer) with one Python calculator after the LLM node: it passes the response chunks on and
raises on the fourth, so the failure is the graph's (a calculator raised, the run errored) and
reaches the HTTP route after the SSE headers and the first frames are out. A Responses stream
must then end with `response.failed` (the Response announced by `response.created`, status
"failed", with an `error` {code, message}) and never `[DONE]`; a chat completions stream with an
error frame and `[DONE]`, as before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from tests.e2e.conftest import ExactServer, LaunchExact

MODEL = "relayed"
FAIL_AT = 3  # the relay raises on the chunk at this timestamp (the first three go out)

RELAY = '''
from graphruntime import Calculator, CalculatorContext, Input, Output


class FailingRelayCalculator(Calculator):
    """Passes response chunks on; raises on the one at timestamp {fail_at}."""

    chunk = Input("HTTP_RESPONSE_PAYLOAD", bytes)
    relayed = Output("HTTP_RESPONSE_PAYLOAD", bytes)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[self.chunk]
        if packet.timestamp >= {fail_at}:
            raise RuntimeError("the relay broke")
        cc.outputs[self.relayed].add(packet.payload)
'''

RELAY_NODE = """
node {
  name: "relay"
  calculator: "failing_relay:FailingRelayCalculator"
  input_stream: "HTTP_RESPONSE_PAYLOAD:generated"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
}
"""


@pytest.fixture(scope="module")
def server(
    tiny_llm_gguf: Path,
    make_llm_graph: Callable[..., str],
    launch_exact: LaunchExact,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ExactServer]:
    root = tmp_path_factory.mktemp("relay")
    (root / MODEL).mkdir()
    os.symlink(tiny_llm_gguf, root / MODEL / tiny_llm_gguf.name)
    graph = make_llm_graph(f"./{tiny_llm_gguf.name}", enable_prefix_caching=False)
    node_output = '  output_stream: "HTTP_RESPONSE_PAYLOAD:output"'
    assert graph.count(node_output) == 1  # the LLM node's; the graph's own is not indented
    graph = graph.replace(node_output, '  output_stream: "HTTP_RESPONSE_PAYLOAD:generated"')
    (root / MODEL / "graph.pbtxt").write_text(graph + RELAY_NODE, encoding="utf-8")
    (root / "failing_relay.py").write_text(RELAY.format(fail_at=FAIL_AT), encoding="utf-8")
    config = {"model_config_list": [], "mediapipe_config_list": [{"name": MODEL}]}
    (root / "config.json").write_text(json.dumps(config), encoding="utf-8")
    args = ["--config_path", str(root / "config.json"), "--python_path", str(root)]
    with launch_exact(args, model=MODEL) as running:
        yield running


def sse_events(server: ExactServer, path: str, body: dict[str, Any]) -> tuple[list[str], str]:
    """The `event:` names and the raw text of a streamed reply read with plain HTTP."""
    with server.http() as http, http.stream("POST", path, json=body) as response:
        assert response.status_code == 200, response.read().decode()
        raw = b"".join(response.iter_raw()).decode()
    names = [line[len("event: ") :] for line in raw.splitlines() if line.startswith("event: ")]
    return names, raw


PROMPT = "Count to fifty."
RESPONSES_BODY = {"model": MODEL, "input": PROMPT, "max_output_tokens": 200}


def test_responses_stream_ends_with_response_failed_and_no_done(server: ExactServer) -> None:
    names, raw = sse_events(server, "/v3/responses", {**RESPONSES_BODY, "stream": True})
    assert "[DONE]" not in raw  # Responses streams never use [DONE]
    payloads = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ")]
    assert [p["type"] for p in payloads] == names  # every frame is a named Responses event
    assert names[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in names  # the failure came after output went out
    assert names[-1] == "response.failed"
    assert names.count("response.failed") == 1 and "response.completed" not in names
    assert all("error" not in p for p in payloads)  # no chat-style error frame
    # numbered after the last event the client saw
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    created, failed = payloads[0]["response"], payloads[-1]["response"]
    assert failed["status"] == "failed"
    assert failed["id"] == created["id"] and failed["created_at"] == created["created_at"]
    assert failed["model"] == MODEL and failed["completed_at"] is None
    assert failed["max_output_tokens"] == 200  # the echoed request, as response.created had it
    assert failed["error"]["code"] == "server_error"
    assert "relay" in failed["error"]["message"] and "request id" in failed["error"]["message"]


def test_openai_sdk_sees_response_failed(server: ExactServer) -> None:
    with server.client() as client:
        stream = client.responses.create(
            model=MODEL, input=PROMPT, max_output_tokens=200, stream=True
        )
        events = list(stream)  # no exception: the failure is an event of the stream
        assert events[0].type == "response.created"
        failed = events[-1]
        assert failed.type == "response.failed"
        assert failed.response.status == "failed" and failed.response.error is not None
        assert failed.response.error.code == "server_error"
        assert failed.response.id == events[0].response.id
        with client.responses.stream(model=MODEL, input=PROMPT, max_output_tokens=200) as managed:
            kinds = [event.type for event in managed]
        assert kinds[-1] == "response.failed"


def test_chat_stream_still_ends_with_an_error_frame_and_done(server: ExactServer) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count to fifty."}],
        "max_tokens": 200,
        "stream": True,
    }
    data = server.sse("/v3/chat/completions", body)
    assert data[-1] == "[DONE]"
    error = json.loads(data[-2])["error"]
    assert error["type"] == "server_error" and "relay" in error["message"]
    assert all("choices" in json.loads(chunk) for chunk in data[:-2])
    with server.client() as client, pytest.raises(openai.APIError, match="relay"):
        for _ in client.chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": "Count to fifty."}],
            max_tokens=200,
            stream=True,
        ):
            pass
