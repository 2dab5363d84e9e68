"""Seeing inside a running graph, end to end: the graph page, the profiler's traces, OpenTelemetry.

One server (the tiny random llama: what is seen, not what it answers; an API key, --trace_dir,
--tracing true) exports its spans over OTLP/HTTP to a small collector run by this module, which
keeps them in memory. Requests go through real clients (httpx; a headless Chromium driven by
Playwright for the page, a `system` test).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

MODEL = "lv"
KEY = "page-key-5d1e"
AUTH = {"Authorization": f"Bearer {KEY}"}
CHAT = {
    "model": MODEL,
    "messages": [{"role": "user", "content": "Name a colour."}],
    "max_tokens": 6,
}


class Collector:
    """An OTLP/HTTP trace receiver on 127.0.0.1 keeping every span it gets."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.lock = threading.Lock()
        collector = self

        class Receive(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with collector.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            collector.spans.extend(scope.spans)
                reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def of_trace(self, trace_id: bytes) -> list[Any]:
        with self.lock:
            return [span for span in self.spans if span.trace_id == trace_id]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    running = Collector()
    yield running
    running.close()


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("traces")


@pytest.fixture(scope="module")
def watched(
    tiny_llm_gguf: Path, launch_exact: LaunchExact, collector: Collector, trace_dir: Path
) -> Iterator[ExactServer]:
    args = [
        "--model_path", str(tiny_llm_gguf), "--model_name", MODEL,
        "--trace_dir", str(trace_dir), "--tracing", "true",
    ]  # fmt: skip
    env = {
        "API_KEY": KEY,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{collector.port}",
        "OTEL_SERVICE_NAME": "graphrt-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    with launch_exact(args, model=MODEL, env=env) as server:
        yield server


def stats(server: ExactServer) -> dict[str, Any]:
    with server.http() as http:
        response = http.get(f"/graphs/{MODEL}/stats", headers=AUTH)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def chat(server: ExactServer, stream: bool, headers: dict[str, str] | None = None) -> Any:
    with server.http() as http:
        response = http.post(
            "/v3/chat/completions",
            json={**CHAT, "stream": stream, "stream_options": {"include_usage": True}}
            if stream
            else CHAT,
            headers={**AUTH, **(headers or {})},
        )
    assert response.status_code == 200, response.text
    if not stream:
        return response.json()
    frames = [
        json.loads(line[5:])
        for line in response.text.splitlines()
        if line.startswith("data:") and "[DONE]" not in line
    ]
    return next(frame for frame in frames if frame.get("usage"))


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.1)


# ------------------------------------------------------------------------------ live figures


def test_stats_count_a_requests_calls_packets_and_tokens(watched: ExactServer) -> None:
    before = stats(watched)
    usage = chat(watched, stream=True)["usage"]
    after = stats(watched)
    assert after["state"] == "AVAILABLE" and after["live"] is True
    node_before, node_after = before["nodes"][0], after["nodes"][0]
    assert node_after["name"] == "LLMExecutor"
    assert node_after["calculator"] == "HttpLLMCalculator"
    # Streaming: the request packet, then one LOOPBACK cycle per engine step until [DONE].
    calls = node_after["calls"] - node_before["calls"]
    assert calls >= 2
    assert node_after["packets_in"] - node_before["packets_in"] == calls
    streams = {s["name"]: s["packets"] for s in after["streams"]}
    streams_before = {s["name"]: s["packets"] for s in before["streams"]}
    assert streams["input"] - streams_before["input"] == 1
    assert streams["output"] - streams_before["output"] == calls
    assert streams["loopback"] - streams_before["loopback"] == calls - 1
    assert node_after["latency_ms"]["p99"] >= node_after["latency_ms"]["p50"] > 0
    assert after["runs"]["started"] - before["runs"]["started"] == 1
    assert after["runs"]["active"] == 0 and node_after["queue_depth"] == 0
    engine_before = before["engines"]["LLMExecutor"]
    engine_after = after["engines"]["LLMExecutor"]
    generated = engine_after["tokens_generated"] - engine_before["tokens_generated"]
    assert generated == usage["completion_tokens"]
    assert engine_after["kv_cache_bytes"] > 0


def test_a_failing_request_shows_as_a_node_error(watched: ExactServer) -> None:
    before = stats(watched)["nodes"][0]["errors"]
    with watched.http() as http:
        response = http.post(
            "/v3/chat/completions",
            json={**CHAT, "max_tokens": 100_000},  # beyond the model's context: refused
            headers=AUTH,
        )
    assert response.status_code == 400
    node = stats(watched)["nodes"][0]
    assert node["errors"] == before + 1
    assert "exceeds model max length" in node["recent_errors"][-1]["message"]


def test_pages_and_events_need_the_key_and_a_browser_gets_a_cookie(watched: ExactServer) -> None:
    with watched.http() as http:
        assert http.get(f"/graphs/{MODEL}/stats").status_code == 401
        refused = http.get("/graphs")
        assert refused.status_code == 401 and 'name="api_key"' in refused.text
        assert 'method="post"' in refused.text
        assert http.get("/graphs", params={"api_key": KEY}).status_code == 401  # not in addresses
        wrong = http.post("/graphs/login", data={"api_key": "wrong", "next": f"/graphs/{MODEL}"})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        redirect = http.post("/graphs/login", data={"api_key": KEY, "next": f"/graphs/{MODEL}"})
        assert redirect.status_code == 303
        assert redirect.headers["location"] == f"/graphs/{MODEL}"
        cookie = redirect.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and KEY not in cookie
        assert "Max-Age=" in cookie
    with httpx.Client(base_url=watched.base_url, cookies=redirect.cookies) as browser_like:
        page = browser_like.get(f"/graphs/{MODEL}")
        assert page.status_code == 200
    assert "LLMExecutor" in page.text and 'data-node="0"' in page.text
    assert "http://" not in page.text.split("<svg", 1)[0]  # nothing loaded from elsewhere
    with watched.http() as http:
        listing = http.get("/graphs", headers=AUTH)
        assert f'href="/graphs/{MODEL}"' in listing.text and "AVAILABLE" in listing.text
        with http.stream("GET", f"/graphs/{MODEL}/events", headers=AUTH) as events:
            assert events.headers["content-type"] == "text/event-stream"
            line = next(line for line in events.iter_lines() if line.startswith("data:"))
        assert json.loads(line[5:])["nodes"][0]["name"] == "LLMExecutor"


# ------------------------------------------------------------------------------- profiler


def test_trace_dir_holds_the_nodes_process_events(watched: ExactServer, trace_dir: Path) -> None:
    chat(watched, stream=True)
    path = trace_dir / f"{MODEL}_trace_0.json"
    wait_for(path.exists, f"{path}")
    events = json.loads(path.read_text())
    process = [e for e in events if e.get("cat") == "Process" and e["name"] == "LLMExecutor"]
    assert process, events[:5]
    for event in process:
        assert event["ph"] == "X" and event["dur"] >= 0
        assert event["args"]["calculator"] == "HttpLLMCalculator"
    inputs = [[i["stream"] for i in e["args"]["inputs"]] for e in process]
    assert ["input"] in inputs and ["loopback"] in inputs
    first = next(e for e in process if e["args"]["inputs"] == [{"stream": "input", "timestamp": 0}])
    assert first["args"]["input_timestamp"] == 0


# ---------------------------------------------------------------------------- OpenTelemetry


def test_one_chat_request_is_one_trace_under_the_clients_span(
    watched: ExactServer, collector: Collector
) -> None:
    trace_id, parent_id = secrets.token_bytes(16), secrets.token_bytes(8)
    traceparent = f"00-{trace_id.hex()}-{parent_id.hex()}-01"
    usage = chat(watched, stream=True, headers={"traceparent": traceparent, "X-Request-Id": "r-42"})
    usage = usage["usage"]

    def complete() -> bool:
        names = {span.name for span in collector.of_trace(trace_id)}
        return {"POST /v3/chat/completions", "llm.generate", "llm.decode"} <= names

    wait_for(complete, "the request's spans at the collector")
    spans = collector.of_trace(trace_id)
    (request,) = [s for s in spans if s.name == "POST /v3/chat/completions"]
    assert request.parent_span_id == parent_id
    attributes = {a.key: a.value for a in request.attributes}
    assert attributes["http.response.status_code"].int_value == 200
    assert attributes["graphrt.request_id"].string_value == "r-42"
    calls = [s for s in spans if s.name == "LLMExecutor"]
    assert len(calls) >= 2
    assert all(s.parent_span_id == request.span_id for s in calls)
    streams = [
        attr.value.string_value
        for s in calls
        for attr in s.attributes
        if attr.key == "graphrt.input_streams"
    ]
    assert "input" in streams and "loopback" in streams
    (generate,) = [s for s in spans if s.name == "llm.generate"]
    assert generate.parent_span_id == request.span_id
    tokens = {a.key: a.value.int_value for a in generate.attributes}
    assert tokens["gen_ai.usage.output_tokens"] == usage["completion_tokens"]
    assert tokens["gen_ai.usage.input_tokens"] == usage["prompt_tokens"]
    assert [event.name for event in generate.events] == ["first_token"]
    parts = {s.name: s for s in spans if s.parent_span_id == generate.span_id}
    assert set(parts) == {"llm.queue", "llm.prefill", "llm.decode"}
    assert parts["llm.queue"].end_time_unix_nano <= parts["llm.prefill"].end_time_unix_nano
    assert parts["llm.prefill"].end_time_unix_nano <= parts["llm.decode"].end_time_unix_nano
    assert request.start_time_unix_nano <= generate.start_time_unix_nano
    assert generate.end_time_unix_nano <= request.end_time_unix_nano
    assert len({s.trace_id for s in spans}) == 1


# ------------------------------------------------------------------------- a real browser


@pytest.mark.system
def test_the_page_in_a_browser_shows_the_graph_and_counts_a_request(
    watched: ExactServer, browser: Any
) -> None:
    page = browser.new_page()
    page.goto(f"{watched.base_url}/graphs/{MODEL}")
    page.fill('input[name="api_key"]', KEY)  # the login form POSTs it
    with page.expect_navigation():
        page.click('button[type="submit"]')
    assert page.url == f"{watched.base_url}/graphs/{MODEL}"  # the key never in the address
    node = page.locator('.node[data-node="0"]')
    assert "LLMExecutor" in (node.text_content() or "")
    page.wait_for_selector("#live.on")
    page.wait_for_function(
        "document.querySelector('.node[data-node=\"0\"]').hasAttribute('data-calls')"
    )
    before = int(node.get_attribute("data-calls") or "0")
    chat(watched, stream=True)
    page.wait_for_function(
        f"Number(document.querySelector('.node[data-node=\"0\"]')"
        f".getAttribute('data-calls')) > {before}",
        timeout=20_000,
    )
    assert "in " in (node.text_content() or "") and "tok/s" in (node.text_content() or "")
    node.click()
    details = page.locator("#details")
    assert "HttpLLMCalculator" in details.inner_text()
    assert "Node config" in details.inner_text()
    assert 'calculator: "HttpLLMCalculator"' in details.inner_text()
    screenshot = os.environ.get("GRAPHRT_SCREENSHOT")
    if screenshot:  # docs/operations.md's picture: GRAPHRT_SCREENSHOT=docs/graph-page.png
        page.wait_for_timeout(1500)
        page.screenshot(path=screenshot)
