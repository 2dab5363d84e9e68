"""Graceful shutdown: signalling the whole process group lets a stream in flight run to its
end, then the server exits 0 (a SIGTERM to the server alone: test_ir_model.py's last test); a
second signal exits at once; the engine process never outlives its frontend.

These are about processes and signals, not answers: they serve the tiny random llama
(tests/conftest.py), which starts in about half of SmolLM2's time.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from conftest import LaunchExact


def stream_body(max_tokens: int) -> dict[str, Any]:
    return {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
    }


def gone(pid: int, timeout: float) -> bool:
    """Whether process `pid` has ended (or is a zombie nobody waits for) within `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_a_group_sigterm_drains_like_a_signal_to_the_frontend(
    tiny_llm_gguf: Path, launch_exact: LaunchExact
) -> None:
    server = launch_exact.start(
        ["--model_path", str(tiny_llm_gguf), "--model_name", "smollm2"], new_session=True
    )
    try:
        server.wait_ready()
        (engine,) = server.engine_pids("smollm2")
        # The engine leaves SIGINT and SIGTERM to the frontend: sent to it alone, they do nothing.
        os.kill(engine, signal.SIGTERM)
        os.kill(engine, signal.SIGINT)
        with server.http() as http:
            short = dict(stream_body(4), stream=False)
            assert http.post("/v3/chat/completions", json=short).status_code == 200
            # ~1.5 s of the tiny llama's tokens: still streaming when the signal comes.
            with http.stream("POST", "/v3/chat/completions", json=stream_body(400)) as response:
                assert response.status_code == 200
                lines = response.iter_lines()
                first = [line for line in itertools.islice(lines, 6) if line.startswith("data:")]
                os.killpg(server.process.pid, signal.SIGTERM)  # what Ctrl-C or an init does
                rest = [line for line in lines if line.startswith("data:")]
        assert server.process.wait(60) == 0, server.log()
    finally:
        server.stop()
    payloads = [line[len("data:") :].strip() for line in first + rest]
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert not any("error" in chunk for chunk in chunks), chunks
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert gone(engine, 10), "the engine outlived the server"


def test_a_second_signal_during_the_drain_exits_at_once(
    tiny_llm_gguf: Path, launch_exact: LaunchExact
) -> None:
    server = launch_exact.start(
        ["--model_path", str(tiny_llm_gguf), "--model_name", "smollm2"], new_session=True
    )
    try:
        server.wait_ready()
        (engine,) = server.engine_pids("smollm2")
        with (
            server.http() as http,
            http.stream("POST", "/v3/chat/completions", json=stream_body(4000)) as response,
        ):
            lines = response.iter_lines()
            next(line for line in lines if line.startswith("data:"))
            os.killpg(server.process.pid, signal.SIGTERM)
            server.wait_for_log("shutting down: finishing in-flight requests")
            assert server.process.poll() is None  # draining: the stream is still running
            os.killpg(server.process.pid, signal.SIGTERM)
            assert server.process.wait(30) == 128 + signal.SIGTERM
            with contextlib.suppress(httpx.HTTPError):
                for _ in lines:  # the stream ends with the process
                    pass
    finally:
        server.stop()
    assert "SIGTERM during shutdown: exiting now with code 143" in server.log()
    assert gone(engine, 10), "the engine outlived the server"


def test_the_engine_exits_when_the_frontend_is_killed(
    tiny_llm_gguf: Path, launch_exact: LaunchExact
) -> None:
    server = launch_exact.start(["--model_path", str(tiny_llm_gguf), "--model_name", "smollm2"])
    try:
        server.wait_ready()
        (engine,) = server.engine_pids("smollm2")
        server.process.kill()
        server.process.wait(30)
        assert gone(engine, 10), "the engine outlived its SIGKILLed frontend"
    finally:
        server.stop()
