"""Replicas behind nginx, configured by deploy/nginx/graphrt.conf (Debian's nginx package).

Two `graphrt serve` replicas (the default model, each on its own port) run behind an nginx that
runs here as a foreground process with its pid, logs and temp files in a temporary directory.
The http-context file from deploy/ is used as shipped, except for the replica addresses and the
listen port, which the test rewrites (and checks that it found them). `nginx -t` validates it.

What must hold: health and the OpenAI API through the proxy; requests spread over the replicas;
streamed chunks arrive one by one, even with gzip on for event streams at the http level (a
negative control, the same file with buffering on, shows the check notices buffering); a replica
that crashes (SIGKILL) or is stopped (SIGTERM, as in a rolling update) costs no request, and a
stream in flight on a stopped replica still finishes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

DEPLOY_CONF = Path(__file__).resolve().parents[2] / "deploy" / "nginx" / "graphrt.conf"
DEFAULT_NAME = "SmolLM2-135M-Instruct"
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
UPSTREAM_SERVER = re.compile(r"^(\s*)server 127\.0\.0\.1:\d+( [^;]*)?;$", re.MULTILINE)
# Access log: which replicas a request went to (a retried one lists several) and their answers.
LOG_FORMAT = '"$request" $status upstream=[$upstream_addr] upstream_status=[$upstream_status]'

pytestmark = pytest.mark.system


@pytest.fixture(autouse=True, scope="module")
def _nginx_installed() -> None:
    """Not a skip: a test that skips proves nothing. .ci/run installs the package.

    Checked when a test runs, never at import, so collecting the suite works without nginx.
    """
    if NGINX is None:
        pytest.fail(
            "nginx not installed; .ci/run installs Debian's package (apt-get install nginx)",
            pytrace=False,
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def site_config(ports: Sequence[int], listen: int, buffered: bool = False) -> str:
    """deploy/nginx/graphrt.conf with these replica ports and listen port."""
    text = DEPLOY_CONF.read_text(encoding="utf-8")
    shipped = list(UPSTREAM_SERVER.finditer(text))
    assert len(shipped) == 2, f"expected the two example replicas in {DEPLOY_CONF}"
    indent, parameters = shipped[0].group(1), shipped[0].group(2) or ""
    replicas = "\n".join(f"{indent}server 127.0.0.1:{port}{parameters};" for port in ports)
    first, second = shipped
    text = (
        text[: first.start()] + replicas + text[first.end() : second.start()] + text[second.end() :]
    )
    text, listens = re.subn(
        r"^(\s*)listen 8000;", rf"\1listen 127.0.0.1:{listen};", text, flags=re.M
    )
    assert listens == 1, f"expected `listen 8000;` in {DEPLOY_CONF}"
    if buffered:  # the negative control: buffering on, and graphrt's X-Accel-Buffering ignored
        text, count = re.subn(
            r"proxy_buffering off;",
            "proxy_buffering on;\n        proxy_ignore_headers X-Accel-Buffering;",
            text,
        )
        assert count == 1
    return text


@dataclass
class AccessEntry:
    request: str
    status: int
    upstreams: list[str]
    upstream_statuses: list[str]


ACCESS_LINE = re.compile(r'"(.*)" (\d+) upstream=\[(.*)\] upstream_status=\[(.*)\]')


class Nginx:
    """nginx in the foreground with everything in `root`; see the module docstring."""

    def __init__(self, root: Path, ports: Sequence[int], buffered: bool = False) -> None:
        assert NGINX is not None
        self.root = root
        self.port = free_port()
        for directory in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (root / directory).mkdir(parents=True, exist_ok=True)
        (root / "graphrt.conf").write_text(
            site_config(ports, self.port, buffered), encoding="utf-8"
        )
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};\n" if os.geteuid() == 0 else ""
        (root / "nginx.conf").write_text(
            f"""daemon off;
{user}worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 256; }}
http {{
    # Compression of event streams, as a host's nginx.conf may have it: the filter that makes
    # proxy buffering hold SSE back (without it nginx 1.22 forwards each upstream read anyway).
    gzip on;
    gzip_types text/event-stream application/json;
    gzip_min_length 0;
    log_format upstreams '{LOG_FORMAT}';
    access_log {root}/access.log upstreams;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    include {root}/graphrt.conf;
}}
""",
            encoding="utf-8",
        )
        command = [
            NGINX,
            "-p",
            str(root),
            "-c",
            str(root / "nginx.conf"),
            "-e",
            str(root / "error.log"),
        ]
        checked = subprocess.run([*command, "-t"], capture_output=True, text=True, check=False)
        assert checked.returncode == 0, checked.stderr
        self._output = (root / "nginx.out").open("w", encoding="utf-8")
        self.process = subprocess.Popen(command, stdout=self._output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port)):
                break
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"nginx did not start:\n{self.error_log()}")
            time.sleep(0.05)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=120.0)

    def error_log(self) -> str:
        path = self.root / "error.log"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    def access_log(self) -> list[AccessEntry]:
        entries = []
        path = self.root / "access.log"
        for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
            match = ACCESS_LINE.search(line)
            assert match, line
            entries.append(
                AccessEntry(
                    match[1],
                    int(match[2]),
                    [part.strip() for part in match[3].split(",")],
                    [part.strip() for part in match[4].split(",")],
                )
            )
        return entries

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful: finish open requests
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._output.close()


@contextlib.contextmanager
def running_nginx(root: Path, ports: Sequence[int], buffered: bool = False) -> Iterator[Nginx]:
    proxy = Nginx(root, ports, buffered)
    try:
        yield proxy
    finally:
        proxy.stop()


# ----------------------------------------------------------------------------------- clients


def chat_body(
    max_tokens: int, stream: bool, content: str = "Tell me about Paris."
) -> dict[str, Any]:
    return {
        "model": DEFAULT_NAME,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
        "ignore_eos": True,
        "temperature": 0,
    }


def chat(base_url: str, max_tokens: int = 4) -> dict[str, Any]:
    with httpx.Client(base_url=base_url, timeout=120.0) as http:
        response = http.post("/v3/chat/completions", json=chat_body(max_tokens, stream=False))
    assert response.status_code == 200, response.text
    reply: dict[str, Any] = response.json()
    assert reply["usage"]["completion_tokens"] == max_tokens
    return reply


@dataclass
class Stream:
    reads: list[tuple[float, bytes]]  # (arrival time, bytes) per read from the socket

    @property
    def events(self) -> list[str]:
        text = b"".join(data for _, data in self.reads).decode()
        return [
            line[len("data:") :].strip() for line in text.splitlines() if line.startswith("data:")
        ]

    def pauses(self, at_least: float = 0.004) -> int:
        """How often the stream paused between two reads. Unbuffered, the events arrive one
        engine step (~20 ms here) apart; buffered, in a burst at the end."""
        times = [moment for moment, _ in self.reads]
        return sum(1 for before, after in itertools.pairwise(times) if after - before >= at_least)


def stream_chat(base_url: str, max_tokens: int) -> Stream:
    reads: list[tuple[float, bytes]] = []
    with (
        httpx.Client(base_url=base_url, timeout=120.0) as http,
        http.stream(
            "POST", "/v3/chat/completions", json=chat_body(max_tokens, stream=True)
        ) as response,
    ):
        assert response.status_code == 200, response.read().decode()
        assert response.headers["content-type"].startswith("text/event-stream")
        for data in response.iter_bytes():
            reads.append((time.monotonic(), data))
    stream = Stream(reads)
    assert stream.events[-1] == "[DONE]"
    return stream


def metric(base_url: str, name: str) -> float:
    with httpx.Client(base_url=base_url, timeout=30.0) as http:
        text = http.get("/metrics").text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ---------------------------------------------------------------------------------- fixtures


@dataclass
class Cluster:
    replicas: list[ExactServer]
    proxy: Nginx


def start_replicas(launch_exact: LaunchExact, count: int) -> list[ExactServer]:
    replicas = [launch_exact.start(["--metrics_enable"], model=DEFAULT_NAME) for _ in range(count)]
    for replica in replicas:
        replica.wait_ready()
    return replicas


def stop_replica(replica: ExactServer) -> int:
    """SIGTERM (if still running) and the exit code; never leaves a process behind."""
    return replica.stop()


def kill_replica(replica: ExactServer) -> None:
    """SIGKILL, like a crash; its engine worker must go away with it (pipe EOF)."""
    tasks = Path(f"/proc/{replica.process.pid}/task").glob("*/children")
    workers = [int(pid) for task in tasks for pid in task.read_text().split()]
    assert workers, "the replica has no engine worker"
    replica.process.kill()
    replica.process.wait()
    deadline = time.monotonic() + 30
    for worker in workers:
        while Path(f"/proc/{worker}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        if Path(f"/proc/{worker}").exists():
            os.kill(worker, signal.SIGKILL)
            pytest.fail(f"the engine worker {worker} outlived its killed server")
    replica.stop()  # closes the log; the process is already gone


@contextlib.contextmanager
def cluster(launch_exact: LaunchExact, root: Path, count: int = 2) -> Iterator[Cluster]:
    replicas = start_replicas(launch_exact, count)
    try:
        with running_nginx(root, [replica.port for replica in replicas]) as proxy:
            yield Cluster(replicas, proxy)
    finally:
        codes = {replica.port: stop_replica(replica) for replica in replicas}
    # A replica the test killed reports -9; every other one must have shut down cleanly.
    assert all(code in (0, -signal.SIGKILL) for code in codes.values()), codes


@pytest.fixture(scope="module")
def shared(
    smollm2_gguf: Path, launch_exact: LaunchExact, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Two replicas behind nginx, for the tests that leave them running."""
    with cluster(launch_exact, tmp_path_factory.mktemp("nginx")) as running:
        yield running


# ------------------------------------------------------------------------------------- tests


def test_deploy_config_is_valid_nginx(tmp_path: Path) -> None:
    """The shipped file as is, included in an http block, passes `nginx -t`."""
    assert NGINX is not None
    (tmp_path / "nginx.conf").write_text(
        f"pid {tmp_path}/nginx.pid;\nevents {{}}\nhttp {{ include {DEPLOY_CONF}; }}\n",
        encoding="utf-8",
    )
    result = subprocess.run(
        [
            NGINX,
            "-t",
            "-p",
            str(tmp_path),
            "-c",
            str(tmp_path / "nginx.conf"),
            "-e",
            str(tmp_path / "e.log"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "syntax is ok" in result.stderr


def test_health_and_models_through_the_proxy(shared: Cluster) -> None:
    with shared.proxy.http() as http:
        assert http.get("/v2/health/live").status_code == 200
        assert http.get("/v2/health/ready").status_code == 200
        models = http.get("/v3/models").json()
    assert [model["id"] for model in models["data"]] == [DEFAULT_NAME]


def test_requests_are_spread_over_the_replicas(shared: Cluster) -> None:
    before = [metric(r.base_url, "graphrt_llm_generated_tokens_total") for r in shared.replicas]
    for _ in range(4):
        chat(shared.proxy.base_url)
    after = [metric(r.base_url, "graphrt_llm_generated_tokens_total") for r in shared.replicas]
    assert all(b > a for a, b in zip(before, after, strict=True)), (before, after)
    served = {entry.upstreams[0] for entry in shared.proxy.access_log() if "chat" in entry.request}
    assert served == {f"127.0.0.1:{replica.port}" for replica in shared.replicas}


def test_stream_passes_through_unbuffered(shared: Cluster) -> None:
    direct = stream_chat(shared.replicas[0].base_url, 48)
    proxied = stream_chat(shared.proxy.base_url, 48)
    assert len(proxied.events) == len(direct.events) >= 48
    # Chunks arrive one engine step at a time, as they do from the replica itself.
    assert direct.pauses() >= len(direct.events) // 2, direct.pauses()
    assert proxied.pauses() >= len(proxied.events) // 2, proxied.pauses()


def test_buffering_would_be_noticed(shared: Cluster, tmp_path: Path) -> None:
    """Negative control: the same file with buffering on (and graphrt's X-Accel-Buffering: no
    ignored) fails the check above: the gzipped stream then arrives in one burst at the end."""
    with running_nginx(tmp_path, [r.port for r in shared.replicas], buffered=True) as buffered:
        stream = stream_chat(buffered.base_url, 48)
    assert len(stream.events) >= 48
    assert stream.pauses() < len(stream.events) // 8, stream.pauses()


def test_a_crashed_replica_costs_no_request(
    smollm2_gguf: Path, launch_exact: LaunchExact, tmp_path: Path
) -> None:
    with cluster(launch_exact, tmp_path) as running:
        victim, survivor = running.replicas
        kill_replica(victim)
        for index in range(6):
            if index % 2:
                stream = stream_chat(running.proxy.base_url, 8)
                assert len(stream.events) >= 8
            else:
                chat(running.proxy.base_url)
        with running.proxy.http() as http:
            assert http.get("/v2/health/ready").status_code == 200
        entries = [e for e in running.proxy.access_log() if "chat" in e.request]
        assert [entry.status for entry in entries] == [200] * 6
        dead, alive = f"127.0.0.1:{victim.port}", f"127.0.0.1:{survivor.port}"
        # A request nginx sent to the dead replica was retried on the live one...
        assert any(e.upstreams == [dead, alive] for e in entries), [e.upstreams for e in entries]
        # ...which then took everything else (max_fails=1 marks the dead one down).
        assert all(e.upstreams[-1] == alive for e in entries)
        assert "connect() failed (111: Connection refused) while connecting to upstream" in (
            running.proxy.error_log()
        )


def test_a_stopped_replica_finishes_its_stream_and_costs_no_request(
    smollm2_gguf: Path, launch_exact: LaunchExact, tmp_path: Path
) -> None:
    """A rolling update: SIGTERM to one replica while it streams through the proxy. It stops
    listening at once and finishes the stream; requests nginx sends it meanwhile are refused
    and retried on the other replica."""
    with cluster(launch_exact, tmp_path) as running, ThreadPoolExecutor(5) as pool:
        streaming = pool.submit(stream_chat, running.proxy.base_url, 200)
        deadline = time.monotonic() + 60
        busy: ExactServer | None = None
        while busy is None and time.monotonic() < deadline:
            for replica in running.replicas:
                if metric(replica.base_url, "graphrt_llm_requests_active") > 0:
                    busy = replica
            time.sleep(0.05)
        assert busy is not None, "the stream never started on a replica"
        other = next(replica for replica in running.replicas if replica is not busy)
        busy.process.send_signal(signal.SIGTERM)
        busy.wait_for_log("shutting down")
        # Concurrent requests: least_conn sends one of them to the draining replica.
        replies = list(pool.map(lambda _: chat(running.proxy.base_url, 32), range(4)))
        assert all(reply["choices"][0]["message"]["content"] for reply in replies)
        stream = streaming.result(timeout=120)
        assert busy.process.wait(60) == 0, busy.log()
    frames = [event for event in stream.events if event != "[DONE]"]
    assert len(frames) >= 200
    assert '"finish_reason":"length"' in frames[-1].replace(" ", "")
    entries = [e for e in running.proxy.access_log() if "chat" in e.request]
    assert [entry.status for entry in entries] == [200] * 5
    drained, taken = f"127.0.0.1:{busy.port}", f"127.0.0.1:{other.port}"
    # The stream stayed on the draining replica; everything else ended on the other one...
    assert sorted(entry.upstreams[-1] for entry in entries) == sorted([drained] + [taken] * 4)
    # ...after nginx had tried the draining one for at least one of them.
    assert any(entry.upstreams == [drained, taken] for entry in entries), entries
