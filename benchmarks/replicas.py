"""Two graphrt replicas behind a proxy against one server: requests/s, and the latency the hop adds.

Starts two `graphrt serve` replicas (A and B, the default model) and two nginx instances with
deploy/nginx/graphrt.conf (its example upstream replaced: one proxies to A alone, the other to
A and B), then measures, round by round with the order of the three paths rotated so none always
runs first or last:

- `direct`: replica A, no proxy (one server);
- `proxy 1`: nginx → A (the hop alone);
- `proxy 2`: nginx → A and B (`least_conn`; the replica set).

Per path: the latency of a health request (`/v2/health/ready`, no model work) and of a chat
completion of one token, one at a time on a keep-alive connection, the three paths taking turns
request by request (the median difference to `direct` is what the hop adds to a request), and
a closed loop of streaming chats (`--concurrency` clients, `--max-tokens` tokens each,
serving.py's client): requests/s, output tok/s and TTFT. Medians over rounds; the load average
before and after goes with the numbers (the machine may be shared).

`--pin` gives replica i core i and one inference thread, the one-replica-per-NUMA-node layout
in miniature: `direct` and `proxy 1` are then one replica on one core, `proxy 2` two replicas
on two cores (the scaling question). Unpinned, both replicas' engines want every core: on a
machine with few cores that measures contention, not scaling.

The Kubernetes inference gateway (Envoy and its endpoint picker) is not run here: nginx stands in
for the proxy hop; the picker's own cost (one gRPC call per request) is not in these numbers.

    python benchmarks/replicas.py [--model PATH.gguf] [--rounds 3] [--concurrency 16]
        [--requests 48] [--max-tokens 32] [--single 40] [--pin] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import (  # benchmarks/ is not a package
    CHAT_PATH,
    PROBE_PATH,
    PROMPTS,
    BackgroundServer,
    load_average,
    run_server_level,
    summarize,
)

ROOT = Path(__file__).resolve().parents[1]
DEPLOY_CONF = ROOT / "deploy" / "nginx" / "graphrt.conf"
NAME = "bench"
PATHS = ("direct", "proxy 1", "proxy 2")


def replica(model: Path, index: int, pin: bool) -> BackgroundServer:
    """Replica A (0) or B (1); pinned: on core `index` with one inference thread."""
    taskset = ["taskset", "-c", str(index)] if pin else []
    threads = ["--plugin_config", '{"INFERENCE_NUM_THREADS": 1}'] if pin else []

    def command(port: int) -> list[str]:
        serve = ["serve", "--model_path", str(model), "--model_name", NAME, "--rest_port"]
        return [*taskset, sys.executable, "-m", "graphrt.cli.main", *serve, str(port), *threads]

    return BackgroundServer(f"replica {'AB'[index]}", command, PROBE_PATH)


def nginx_conf(directory: Path, port: int, upstreams: Sequence[str]) -> Path:
    """The deploy file with its example replicas replaced by `upstreams`, listening on `port`,
    inside a complete nginx.conf that keeps every file in `directory`."""
    shipped = DEPLOY_CONF.read_text(encoding="utf-8")
    servers = "".join(f"    server {u} max_fails=1 fail_timeout=10s;\n" for u in upstreams)
    http_block, count = re.subn(r"(?m)^    server 127\.0\.0\.1:\d+ [^;]*;\n", "", shipped)
    assert count == 2, "deploy/nginx/graphrt.conf no longer lists two example replicas"
    http_block = http_block.replace("    least_conn;\n", "    least_conn;\n" + servers, 1)
    http_block = http_block.replace("listen 8000;", f"listen 127.0.0.1:{port};", 1)
    for sub in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    conf = directory / "nginx.conf"
    user = "user root;\n" if os.geteuid() == 0 else ""  # its workers read these directories
    conf.write_text(
        f"daemon off;\n{user}worker_processes 1;\npid {directory}/nginx.pid;\n"
        f"error_log {directory}/error.log warn;\nevents {{ worker_connections 1024; }}\n"
        f"http {{\n access_log off;\n client_body_temp_path {directory}/client_body;\n"
        f" proxy_temp_path {directory}/proxy;\n fastcgi_temp_path {directory}/fastcgi;\n"
        f" uwsgi_temp_path {directory}/uwsgi;\n scgi_temp_path {directory}/scgi;\n"
        f"{http_block}\n}}\n"
    )
    return conf


def proxy(nginx: str, label: str, upstreams: Sequence[str]) -> BackgroundServer:
    directory = Path(tempfile.mkdtemp(prefix="graphrt-replicas-"))

    def command(port: int) -> list[str]:
        conf = nginx_conf(directory, port, upstreams)
        return [nginx, "-p", str(directory), "-c", str(conf), "-e", str(directory / "error.log")]

    return BackgroundServer(label, command, PROBE_PATH)


def interleaved_ms(
    urls: dict[str, str], path: str, body: bytes | None, count: int
) -> dict[str, list[float]]:
    """`count` requests per path, one at a time, the paths taking turns (so each sees the same
    machine), each path on its keep-alive connection (as SDK clients send them): latencies in
    ms by path, the i-th of each path measured next to each other's i-th."""
    connections = {
        name: http.client.HTTPConnection(urllib.parse.urlsplit(url).netloc, timeout=120)
        for name, url in urls.items()
    }
    method, headers = ("POST", {"Content-Type": "application/json"}) if body else ("GET", {})
    latencies: dict[str, list[float]] = {name: [] for name in urls}
    try:
        for index in range(count):
            names = list(urls)
            shift = index % len(names)
            for name in names[shift:] + names[:shift]:
                connection = connections[name]
                started = time.perf_counter()
                connection.request(method, path, body, headers)
                response = connection.getresponse()
                response.read()
                latencies[name].append((time.perf_counter() - started) * 1e3)
                assert response.status == 200, (name, response.status)
    finally:
        for connection in connections.values():
            connection.close()
    return latencies


ONE_TOKEN_CHAT = json.dumps(
    {"model": NAME, "messages": PROMPTS[0], "max_completion_tokens": 1, "temperature": 0}
).encode()


@dataclass
class Sample:
    round: int
    path: str
    health_ms: float  # medians of the one-at-a-time requests
    health_added_ms: float  # median of (this path - direct), request by request
    chat_1_token_ms: float
    chat_added_ms: float
    requests_per_s: float  # the closed loop
    output_tok_per_s: float
    ttft_p50_ms: float
    failed: int


def added(latencies: dict[str, list[float]], path: str) -> float:
    """The median of the differences to `direct`, request by request."""
    pairs = zip(latencies[path], latencies["direct"], strict=True)
    return float(statistics.median(mine - direct for mine, direct in pairs))


def measure_round(round_index: int, urls: dict[str, str], args: argparse.Namespace) -> list[Sample]:
    health = interleaved_ms(urls, PROBE_PATH, None, 5 * args.single)
    chats = interleaved_ms(urls, CHAT_PATH, ONE_TOKEN_CHAT, args.single)
    samples = []
    shift = round_index % len(PATHS)
    for path in PATHS[shift:] + PATHS[:shift]:  # each path first in some round
        results, duration = asyncio.run(
            run_server_level(urls[path], NAME, args.concurrency, args.requests, args.max_tokens)
        )
        load = summarize(results, duration, args.concurrency, args.max_tokens)
        sample = Sample(
            round_index,
            path,
            float(statistics.median(health[path])),
            added(health, path),
            float(statistics.median(chats[path])),
            added(chats, path),
            load.request_throughput,
            load.output_throughput,
            load.median_ttft_ms,
            load.failed,
        )
        samples.append(sample)
        print(
            f"round {round_index + 1} {path:>8}: health {sample.health_ms:5.2f} ms "
            f"({sample.health_added_ms:+.2f}), 1-token chat {sample.chat_1_token_ms:6.1f} ms "
            f"({sample.chat_added_ms:+.1f}), {sample.requests_per_s:5.2f} req/s, "
            f"{sample.output_tok_per_s:6.1f} tok/s, TTFT p50 {sample.ttft_p50_ms:7.1f} ms, "
            f"failed {sample.failed}",
            flush=True,
        )
    return samples


FIELDS = (
    "requests_per_s",
    "output_tok_per_s",
    "ttft_p50_ms",
    "health_ms",
    "health_added_ms",
    "chat_1_token_ms",
    "chat_added_ms",
)


def print_table(samples: Sequence[Sample]) -> dict[str, Any]:
    """Medians over rounds, per path."""
    summary: dict[str, Any] = {
        path: {
            field: float(statistics.median(getattr(s, field) for s in samples if s.path == path))
            for field in FIELDS
        }
        for path in PATHS
    }
    print("\n| path | req/s | tok/s | TTFT p50 ms | health ms (added) | 1-token chat ms (added) |")
    print("|---|---|---|---|---|---|")
    for path in PATHS:
        row = summary[path]
        print(
            f"| {path} | {row['requests_per_s']:.2f} | {row['output_tok_per_s']:.1f} | "
            f"{row['ttft_p50_ms']:.0f} | {row['health_ms']:.2f} ({row['health_added_ms']:+.2f}) "
            f"| {row['chat_1_token_ms']:.1f} ({row['chat_added_ms']:+.1f}) |"
        )
    ratio = summary["proxy 2"]["requests_per_s"] / summary["direct"]["requests_per_s"]
    print(f"\ntwo replicas / one server, requests/s: {ratio:.2f}x")
    summary["two_over_one"] = ratio
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    from graphrt.serving.default_model import default_model_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=None, help="GGUF (default model)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16, help="clients of the load phase")
    parser.add_argument("--requests", type=int, default=48, help="requests of the load phase")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--single", type=int, default=40, help="one-token chats per path")
    parser.add_argument("--pin", action="store_true", help="replica i on core i, one thread")
    parser.add_argument("--json", type=Path, help="write the samples and the summary here")
    args = parser.parse_args(argv)
    args.model = args.model or default_model_path()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).is_file():
        print("nginx is needed (apt-get install nginx)", file=sys.stderr)
        return 2
    replicas = [replica(args.model, index, args.pin) for index in range(2)]
    servers = list(replicas)
    samples: list[Sample] = []
    before = load_average()
    try:
        for server in replicas:
            server.wait_ready()
        a, b = (server.url.removeprefix("http://") for server in replicas)
        proxies = [proxy(nginx, "nginx 1", [a]), proxy(nginx, "nginx 2", [a, b])]
        servers += proxies
        for server in proxies:
            server.wait_ready()
        urls = dict(zip(PATHS, [replicas[0].url, proxies[0].url, proxies[1].url], strict=True))
        for url in (replicas[0].url, replicas[1].url):  # warm: every prompt once on each
            asyncio.run(run_server_level(url, NAME, len(PROMPTS), len(PROMPTS), 4))
        for round_index in range(args.rounds):
            samples += measure_round(round_index, urls, args)
    finally:
        for server in reversed(servers):
            server.stop()
    after = load_average()
    print(f"\nload average before {before}, after {after}; pinned: {args.pin}")
    summary = print_table(samples)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "summary": summary,
                    "samples": [asdict(s) for s in samples],
                    "load_average": [before, after],
                    "pinned": args.pin,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
