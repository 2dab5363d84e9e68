"""Graceful shutdown: SIGTERM lets a stream in flight run to its end, then the server exits 0."""

from __future__ import annotations

import itertools
import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conftest import Launch


def test_sigterm_lets_an_open_stream_finish(smollm2_ir_dir: Path, launch: Launch) -> None:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": "Tell me a long story."}],
        "temperature": 0,
        "max_tokens": 48,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with launch(["--model_path", str(smollm2_ir_dir)]) as server:
        body["model"] = server.model
        with (
            server.http() as http,
            http.stream("POST", "/v3/chat/completions", json=body) as response,
        ):
            assert response.status_code == 200
            lines = response.iter_lines()
            first = [line for line in itertools.islice(lines, 6) if line.startswith("data:")]

            server.process.send_signal(signal.SIGTERM)

            rest = [line for line in lines if line.startswith("data:")]
        assert server.process.wait(30) == 0, server.log()

    payloads = [line[len("data:") :].strip() for line in first + rest]
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(payload) for payload in payloads[:-1]]
    assert not any("error" in chunk for chunk in chunks), chunks
    assert chunks[-1]["usage"]["completion_tokens"] == 48
    reasons = [c["finish_reason"] for chunk in chunks for c in chunk["choices"]]
    assert reasons[-1] == "length"
