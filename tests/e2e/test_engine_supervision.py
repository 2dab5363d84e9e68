"""Engine processes that die are restarted, one servable at a time; queues are bounded.

One server for the module, from a config.json with two graphs over the same GGUF: `a`, whose
engine the tests kill, and `b`, which must keep serving throughout and carries a queue bound of
its own (`# GRAPHRT_MAX_QUEUED_REQUESTS: 1`, one sequence per batch). `--max_engine_restarts 1`
makes the restart budget small enough to exhaust.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

if TYPE_CHECKING:
    from conftest import ExactServer, GraphRepository, LaunchExact

RESTART_LIMIT = 1


@pytest.fixture(scope="module")
def supervised(
    graph_repository: Callable[[str], GraphRepository], launch_exact: LaunchExact
) -> Iterator[ExactServer]:
    repository = graph_repository("supervised")
    repository.add_graph("a")
    repository.add_graph("b", max_num_seqs=1)
    graph_b = repository.root / "b" / "graph.pbtxt"
    graph_b.write_text("# GRAPHRT_MAX_QUEUED_REQUESTS: 1\n" + graph_b.read_text())
    repository.serve(["a", "b"])
    args = [
        "--config_path",
        str(repository.config),
        "--max_engine_restarts",
        str(RESTART_LIMIT),
        "--metrics_enable",
        "--file_system_poll_wait_seconds",
        "0",
    ]
    with launch_exact(args, model="a") as server:
        yield server


def chat(model: str, max_tokens: int = 4, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a story about a cat."}],
        "max_tokens": max_tokens,
        **extra,
    }


def version_status(http: httpx.Client, name: str) -> dict[str, Any]:
    status: dict[str, Any] = http.get("/v1/config").json()[name]["model_version_status"][0]
    return status


def samples(http: httpx.Client, metric: str) -> dict[str, float]:
    """Values of one metric by its `name` label."""
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(http.get("/metrics").text):
        for sample in family.samples:
            if sample.name == metric:
                found[sample.labels["name"]] = sample.value
    return found


class Bystander:
    """Sends requests to servable `b`, one after another, until stopped; keeps the statuses."""

    def __init__(self, server: ExactServer) -> None:
        self.server = server
        self.statuses: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        with self.server.http() as http:
            while not self._stop.is_set():
                response = http.post("/v3/chat/completions", json=chat("b"))
                self.statuses.append(response.status_code)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def test_a_killed_engine_is_restarted_while_the_other_servable_serves(
    supervised: ExactServer,
) -> None:
    server = supervised
    (old_pid,) = server.engine_pids("a")
    frames: list[str] = []
    first_frame = threading.Event()

    def stream() -> None:
        body = chat("a", max_tokens=6000, ignore_eos=True, stream=True)
        with (
            server.http() as http,
            http.stream("POST", "/v3/chat/completions", json=body) as response,
        ):
            for line in response.iter_lines():
                if line.startswith("data:"):
                    frames.append(line[len("data:") :].strip())
                    first_frame.set()

    with Bystander(server) as bystander:
        reader = threading.Thread(target=stream)
        reader.start()
        assert first_frame.wait(60), server.log()
        os.kill(old_pid, signal.SIGKILL)
        reader.join(5)
        assert not reader.is_alive(), "the stream did not end within 5 s of the engine's death"
        assert frames[-1] == "[DONE]"
        error = json.loads(frames[-2])["error"]
        assert error["type"] == "server_error" and "engine" in error["message"]

        with server.http() as http:
            assert http.get("/v2/models/a/ready").status_code == 503
            assert http.get("/v2/models/b/ready").status_code == 200
            assert "a" not in [m["id"] for m in http.get("/v3/models").json()["data"]]
            refused = http.post("/v3/chat/completions", json=chat("a"))
            assert refused.status_code == 503, refused.text
            assert int(refused.headers["Retry-After"]) >= 1
            assert refused.json()["error"]["type"] == "server_error"
            statuses: list[dict[str, Any]] = []  # one reading holds the message and the state

            def names_the_signal(h: httpx.Client) -> bool:
                statuses.append(version_status(h, "a"))
                return "SIGKILL" in statuses[-1]["status"]["error_message"]

            server.wait_for(names_the_signal, "the status to name the signal", timeout=10)
            assert statuses[-1]["state"] == "LOADING", statuses[-1]
            server.wait_for_log("engine process of a was killed by signal SIGKILL; restarting")

            restarted = time.monotonic()
            server.wait_for(
                lambda h: h.get("/v2/models/a/ready").status_code == 200,
                "servable a to be restarted",
                timeout=30,  # the bound: 0.5 s backoff, then a load of a few seconds
            )
            print(f"engine of a restarted in {time.monotonic() - restarted:.1f} s after the kill")
            answer = http.post("/v3/chat/completions", json=chat("a"))
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"]
            assert version_status(http, "a")["state"] == "AVAILABLE"
            assert samples(http, "graphrt_engine_restarts_total") == {"a": 1.0, "b": 0.0}
        new_pid = server.engine_pids("a")[-1]
        assert new_pid != old_pid
        assert Path(f"/proc/{new_pid}").exists()

    assert bystander.statuses and set(bystander.statuses) == {200}, bystander.statuses


async def test_a_full_queue_answers_503_with_retry_after(supervised: ExactServer) -> None:
    """`b` runs one sequence at a time and lets one wait: a third request is refused."""
    server = supervised
    body = chat("b", max_tokens=6000, ignore_eos=True, stream=True)
    async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as http:
        metrics = server.http()

        async def hold() -> None:
            async with http.stream("POST", "/v3/chat/completions", json=body) as response:
                async for _ in response.aiter_lines():
                    pass

        holders = [asyncio.create_task(hold()) for _ in range(2)]
        try:
            deadline = time.monotonic() + 60
            while samples(metrics, "graphrt_llm_requests_queued").get("b") != 1:
                assert time.monotonic() < deadline, "the second request never queued"
                await asyncio.sleep(0.05)
            burst = await asyncio.gather(
                *(http.post("/v3/chat/completions", json=chat("b")) for _ in range(6))
            )
        finally:
            metrics.close()
            for holder in holders:
                holder.cancel()
            await asyncio.gather(*holders, return_exceptions=True)
    for refused in burst:
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["code"] == "queue_full"
    with server.http() as again:  # the aborted requests leave; the queue empties
        server.wait_for(
            lambda h: samples(h, "graphrt_llm_requests_active").get("b") == 0,
            "the held requests to be aborted",
            timeout=30,
        )
        assert again.post("/v3/chat/completions", json=chat("b")).status_code == 200


def test_an_engine_that_keeps_dying_stays_down_with_the_reason(supervised: ExactServer) -> None:
    server = supervised
    with server.http() as http:
        for _ in range(RESTART_LIMIT + 2):
            server.wait_for(
                lambda h: version_status(h, "a")["state"] != "LOADING", "a to settle", timeout=60
            )
            if version_status(http, "a")["state"] == "UNAVAILABLE":
                break
            os.kill(server.engine_pids("a")[-1], signal.SIGKILL)
            server.wait_for(
                lambda h: version_status(h, "a")["state"] != "AVAILABLE", "a to go down", 10
            )
        status = version_status(http, "a")
        assert status["state"] == "UNAVAILABLE", status
        message = status["status"]["error_message"]
        assert "killed by signal SIGKILL" in message and "not restarted again" in message
        refused = http.post("/v3/chat/completions", json=chat("a"))
        assert refused.status_code == 503
        assert "Retry-After" not in refused.headers  # it will not come back by itself
        assert http.get("/v2/health/ready").status_code == 503
        assert http.post("/v3/chat/completions", json=chat("b")).status_code == 200
