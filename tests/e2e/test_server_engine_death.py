"""An engine process that dies: the open stream ends with an error frame and [DONE], the
servable turns UNAVAILABLE with the reason, readiness drops, new requests get 503, and the
server still shuts down cleanly."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conftest import Launch


def engine_pid(server_pid: int) -> int:
    """The engine worker is the server's child running servables.engine.worker."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parent = next(line for line in status.splitlines() if line.startswith("PPid:"))
        if int(parent.split()[1]) == server_pid and "servables.engine.worker" in command:
            return int(entry.name)
    raise AssertionError(f"no engine worker under process {server_pid}")


def test_engine_death_is_reported_and_contained(smollm2_gguf: Path, launch: Launch) -> None:
    with launch(["--model_path", str(smollm2_gguf)]) as server:
        body = {
            "model": server.model,
            "messages": [{"role": "user", "content": "Write a very long story."}],
            "max_tokens": 2000,
            "ignore_eos": True,
            "stream": True,
        }
        frames: list[str] = []
        first_frame = threading.Event()

        def stream() -> None:
            with (
                server.http() as http,
                http.stream("POST", "/v3/chat/completions", json=body) as response,
            ):
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        frames.append(line[len("data:") :].strip())
                        first_frame.set()

        reader = threading.Thread(target=stream)
        reader.start()
        assert first_frame.wait(60)
        os.kill(engine_pid(server.process.pid), signal.SIGKILL)
        reader.join(60)
        assert not reader.is_alive(), "the stream hung after the engine died"

        assert frames[-1] == "[DONE]"
        error = json.loads(frames[-2])["error"]
        assert error["type"] == "server_error" and "engine" in error["message"]

        with server.http() as http:
            deadline = time.monotonic() + 10
            while http.get("/v2/health/ready").status_code != 503:
                assert time.monotonic() < deadline, "readiness did not drop"
                time.sleep(0.1)
            assert http.get("/v2/health/live").status_code == 200
            status = http.get("/v1/config").json()[server.model]["model_version_status"][0]
            assert status["state"] == "UNAVAILABLE"
            assert "engine" in status["status"]["error_message"]
            refused = http.post(
                "/v3/chat/completions",
                json={"model": server.model, "messages": [{"role": "user", "content": "hi"}]},
            )
        assert refused.status_code == 503
        assert refused.json()["error"]["type"] == "server_error"
