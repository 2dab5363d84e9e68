"""OVMS's pull mode with graphrt in place of ovms: a GGUF repository from the Hugging Face cache.

No network here, so each test places the repository in a Hugging Face cache of its own, laid out
as snapshot_download leaves it (`place_in_hf_cache`), and runs with HF_HUB_OFFLINE=1: the pull
goes through huggingface_hub's real code path and finds it there. The test of the server during
a download serves the file from a hub of its own on localhost (HF_ENDPOINT), which holds the
download until the test lets it go. The repository holds the tiny random llama (SmolLM2's
tokenizer): what is tested is the pull and the layout, and its start is ~5 s shorter.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import openai
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import place_in_hf_cache

if TYPE_CHECKING:
    from conftest import Golden, LaunchExact

REPO = "test-org/tiny-llama-GGUF"


def environment(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}


def graphrt(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`graphrt` as OVMS's command lines call `ovms`: no subcommand."""
    return subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", *args],
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )


def pull_and_start(tmp_path: Path, gguf: Path) -> list[str]:
    """OVMS's command line that pulls the GGUF of REPO into tmp_path/models and serves it."""
    return [
        "--source_model",
        REPO,
        "--gguf_filename",
        gguf.name,
        "--model_repository_path",
        str(tmp_path / "models"),
    ]


def test_pull_and_start_serves_the_gguf_as_ovms_lays_it_out(
    tmp_path: Path, tiny_llm_gguf: Path, launch_exact: LaunchExact, tiny_golden: Golden
) -> None:
    place_in_hf_cache(tmp_path / "hf", REPO, {tiny_llm_gguf.name: tiny_llm_gguf})
    args = [*pull_and_start(tmp_path, tiny_llm_gguf), "--task", "text_generation"]
    expected = tiny_golden.completion("Once upon a time", 12)
    with (
        launch_exact(args, model=REPO, env=environment(tmp_path)) as server,
        openai.OpenAI(base_url=f"{server.base_url}/v3", api_key="unused") as client,
    ):
        reply = client.completions.create(
            model=REPO, prompt="Once upon a time", temperature=0, max_tokens=12
        )
        listed = [model.id for model in client.models.list()]
    assert reply.choices[0].text == expected.text
    assert listed == [REPO]
    model_dir = tmp_path / "models" / REPO
    assert {p.name for p in model_dir.iterdir()} == {"graph.pbtxt", tiny_llm_gguf.name}
    assert f'models_path: "./{tiny_llm_gguf.name}"' in (model_dir / "graph.pbtxt").read_text()


def test_pull_only_then_config_management_as_ovms(tmp_path: Path, tiny_llm_gguf: Path) -> None:
    place_in_hf_cache(tmp_path / "hf", REPO, {tiny_llm_gguf.name: tiny_llm_gguf})
    pull = ["--pull", "--source_model", REPO, "--gguf_filename", tiny_llm_gguf.name]
    pulled = graphrt(tmp_path, *pull, "--model_repository_path", "models")
    assert pulled.returncode == 0, pulled.stderr
    model_dir = tmp_path / "models" / REPO
    assert (model_dir / tiny_llm_gguf.name).stat().st_size == tiny_llm_gguf.stat().st_size
    assert not [p for p in (tmp_path / "models" / "test-org").iterdir() if p.name.startswith(".")]
    # Again, with the model there: no download, the graph rewritten from the flags.
    again = graphrt(tmp_path, *pull, "--model_repository_path", "models", "--max_num_seqs", "7")
    assert again.returncode == 0, again.stderr
    assert "in the model repository already" in again.stderr
    assert "max_num_seqs: 7" in (model_dir / "graph.pbtxt").read_text()
    listed = graphrt(tmp_path, "--list_models", "--model_repository_path", "models")
    assert listed.stdout.splitlines() == [REPO]
    env_repository = {"OVMS_MODEL_REPOSITORY_PATH": str(tmp_path / "models")}
    added = subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", "--add_to_config", "--model_name", REPO],
        env={**environment(tmp_path), **env_repository},
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    config = (tmp_path / "models" / "config.json").read_text()
    assert f'"name": "{REPO}"' in config and f'"base_path": "{REPO}"' in config


def test_a_missing_repository_or_file_is_one_line_and_writes_nothing(
    tmp_path: Path, tiny_llm_gguf: Path
) -> None:
    place_in_hf_cache(tmp_path / "hf", REPO, {tiny_llm_gguf.name: tiny_llm_gguf})
    base = ["--pull", "--model_repository_path", "models"]
    unknown = graphrt(tmp_path, *base, "--source_model", "test-org/nothing-here")
    assert unknown.returncode == 1
    assert "test-org/nothing-here is not in the Hugging Face cache and HF_HUB_OFFLINE is set" in (
        unknown.stderr
    )
    wrong = graphrt(tmp_path, *base, "--source_model", REPO, "--gguf_filename", "Q8.gguf")
    assert wrong.returncode == 1
    assert f"Q8.gguf of {REPO} is not in the Hugging Face cache" in wrong.stderr
    assert not (tmp_path / "models" / REPO).exists()
    leftovers = list((tmp_path / "models").rglob(".*")) if (tmp_path / "models").exists() else []
    assert leftovers == []


class HeldHub(http.server.ThreadingHTTPServer):
    """Hugging Face's file endpoint for one file (`/{repo}/resolve/main/{name}`), whose download
    starts only once `release` is set; everything else is 404."""

    def __init__(self, file: Path) -> None:
        self.file = file
        self.release = threading.Event()
        self.requested = threading.Event()
        super().__init__(("127.0.0.1", 0), HeldHubHandler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class HeldHubHandler(http.server.BaseHTTPRequestHandler):
    server: HeldHub

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _headers(self) -> bool:
        if not self.path.endswith(f"/resolve/main/{self.server.file.name}"):
            self.send_error(404)
            return False
        self.send_response(200)
        self.send_header("ETag", '"' + "a" * 64 + '"')
        self.send_header("X-Repo-Commit", "0" * 40)
        self.send_header("Content-Length", str(self.server.file.stat().st_size))
        self.end_headers()
        return True

    def do_HEAD(self) -> None:
        self._headers()

    def do_GET(self) -> None:
        self.server.requested.set()
        if not self.server.release.wait(300) or not self._headers():
            return
        with self.server.file.open("rb") as data:
            while chunk := data.read(1 << 20):
                self.wfile.write(chunk)


@contextlib.contextmanager
def held_hub(file: Path) -> Iterator[HeldHub]:
    hub = HeldHub(file)
    thread = threading.Thread(target=hub.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        hub.release.set()
        hub.shutdown()
        hub.server_close()


def test_the_server_is_live_and_says_loading_while_it_pulls(
    tmp_path: Path, tiny_llm_gguf: Path, launch_exact: LaunchExact
) -> None:
    """OVMS's pull-and-start opens its ports first: a pod's liveness probe must see a live
    server through a long download, readiness must stay false, the status must say LOADING,
    /metrics must answer and a request for the model must get a 503 it can retry."""
    args = [*pull_and_start(tmp_path, tiny_llm_gguf), "--metrics_enable"]
    with held_hub(tiny_llm_gguf) as hub:
        env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_ENDPOINT": hub.url}
        with launch_exact(args, model=REPO, env=env, wait_ready=False) as server:
            server.wait_for(lambda http: http.get("/v2/health/live").status_code == 200, "live")
            assert hub.requested.wait(60), "the server never started the download"
            with server.http() as http:
                assert http.get("/v2/health/live").status_code == 200
                assert http.get("/v2/health/ready").status_code == 503
                status = http.get("/v1/config").json()
                assert status[REPO]["model_version_status"][0]["state"] == "LOADING"
                families = {
                    family.name
                    for family in text_string_to_metric_families(http.get("/metrics").text)
                }
                assert "graphrt_server_requests_waiting" in families
                body = {"model": REPO, "prompt": "Once upon a time", "max_tokens": 4}
                busy = http.post("/v3/completions", json=body)
                assert busy.status_code == 503, busy.text
                assert f"pulling {REPO}" in busy.json()["error"]["message"]
                assert int(busy.headers["Retry-After"]) > 0
            hub.release.set()
            server.wait_ready()
            with server.client() as client:  # what it answers: the test above
                reply = client.completions.create(model=REPO, prompt="Once", max_tokens=3)
            assert reply.usage is not None and reply.usage.completion_tokens > 0


def test_a_pull_that_fails_after_the_server_started_ends_it_with_1(tmp_path: Path) -> None:
    """As OVMS: the ports were open, but there is nothing to serve."""
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    args = ["--source_model", "test-org/nothing-here", "--model_repository_path", "models"]
    failed = subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", *args, "--rest_port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert failed.returncode == 1, failed.stderr
    assert "REST server listening" in failed.stderr
    assert "test-org/nothing-here is not in the Hugging Face cache" in failed.stderr
