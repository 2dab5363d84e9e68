"""What watching costs: serving throughput with the graph page, profiler and tracing on vs. off.

Two `graphrt serve` processes on the same model, measured in one run, alternately (never at the
same time; the box has 2 cores), with the same closed-loop streaming chat load as
benchmarks/serving.py:

- off: `--graph_stats false`, no profiler, no tracing: no observer is attached to any graph run;
- on:  live graph stats, `--trace_dir` (the profiler writing Chrome trace files), `--tracing true`
  exporting every span over OTLP/HTTP to a sink in this process, and a client connected to the
  graph page's SSE stream (/graphs/NAME/events) for the whole measurement.

Each round runs both, in alternating order; the verdict is the median over rounds of the on/off
output-throughput ratio (target: at most 3% cost).

    python benchmarks/observability.py [--model PATH.gguf] [--concurrency 8] [--num-prompts 32]
        [--max-tokens 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the sibling script (this directory is on sys.path above, so it runs from anywhere)
from serving import (
    PROMPTS,
    WARMUP_TOKENS,
    CpuMeter,
    ServerProcess,
    run_server_level,
    summarize,
)

TARGET_COST = 0.03
NAME = "bench"


class SpanSink:
    """Accepts OTLP/HTTP exports and counts their bytes (what a collector would receive)."""

    def __init__(self) -> None:
        self.requests = 0
        self.bytes = 0
        sink = self

        class Receive(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                sink.requests += 1
                sink.bytes += len(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Receive)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


class PageWatcher(threading.Thread):
    """A client of the graph page's SSE stream, as an open browser tab is."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.events = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with urllib.request.urlopen(self.url, timeout=30) as response:
            for line in response:
                if line.startswith(b"data:"):
                    self.events += 1
                if self.stop.is_set():
                    return


def measure(
    server: ServerProcess, concurrency: int, count: int, max_tokens: int
) -> tuple[float, float, float]:
    """Output tok/s, and the server frontend's and engine's CPU ms per output token."""
    meter = CpuMeter([server.process.pid])
    mark = meter.snapshot()
    results, duration = asyncio.run(
        run_server_level(server.url, NAME, concurrency, count, max_tokens)
    )
    cpu = meter.since(mark)
    metrics = summarize(results, duration, concurrency, max_tokens)
    if metrics.failed:
        raise RuntimeError(f"{metrics.failed} requests failed: {metrics.errors}")
    tokens = max(1, metrics.total_output_tokens)
    frontend = (cpu.frontend_s or 0.0) * 1e3 / tokens
    engine = (cpu.engine_worker_s or 0.0) * 1e3 / tokens
    return metrics.output_throughput, frontend, engine


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--num-prompts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    model = args.model
    if model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    sink = SpanSink()
    trace_dir = tempfile.mkdtemp(prefix="graphrt-bench-traces-")
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = sink.url
    os.environ["OTEL_SERVICE_NAME"] = "graphrt-benchmark"
    common = ["--cache_size", "0", "--max_num_batched_tokens", "256"]
    off = ServerProcess(model, NAME, [*common, "--graph_stats", "false"])
    on = ServerProcess(model, NAME, [*common, "--trace_dir", trace_dir, "--tracing", "true"])
    watcher: PageWatcher | None = None
    page_events = 0
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    rows: list[tuple[int, float, float, float, float]] = []
    try:
        off.wait_ready()
        on.wait_ready()
        for server in (off, on):
            measure(server, 1, len(PROMPTS), WARMUP_TOKENS)
        watcher = PageWatcher(f"{on.url}/graphs/{NAME}/events")
        watcher.start()
        for round_index in range(args.rounds):
            order = [("off", off), ("on", on)]
            if round_index % 2:
                order.reverse()
            speeds: dict[str, float] = {}
            frontend: dict[str, float] = {}
            for label, server in order:
                speeds[label], frontend[label], engine = measure(
                    server, args.concurrency, args.num_prompts, args.max_tokens
                )
                print(
                    f"round {round_index + 1} {label:>3}: {speeds[label]:.1f} tok/s, CPU per "
                    f"token: frontend {frontend[label]:.3f} ms, engine {engine:.3f} ms",
                    flush=True,
                )
            rows.append(
                (round_index + 1, speeds["off"], speeds["on"], frontend["off"], frontend["on"])
            )
            ratios.append(speeds["on"] / speeds["off"])
            cpu_ratios.append(frontend["on"] / frontend["off"])
    finally:
        if watcher is not None:
            watcher.stop.set()
            page_events = watcher.events
        on.stop()
        off.stop()
    traces = sorted(Path(trace_dir).glob("*.json"))
    ratio = statistics.median(ratios)
    cost = 1 - ratio
    print()
    print(f"concurrency {args.concurrency}, {args.num_prompts} prompts x {args.max_tokens} tokens")
    print(
        f"{'round':>5} {'off tok/s':>10} {'on tok/s':>10} {'on/off':>7}   "
        f"{'frontend CPU ms/token off':>25} {'on':>6}"
    )
    for index, slow, fast, cpu_off, cpu_on in rows:
        print(
            f"{index:>5} {slow:>10.1f} {fast:>10.1f} {fast / slow:>7.3f}   "
            f"{cpu_off:>25.3f} {cpu_on:>6.3f}"
        )
    print(
        f"frontend CPU per token, median on/off: {statistics.median(cpu_ratios):.3f} "
        "(what watching adds to the HTTP/graph process; the engine process is untouched)"
    )
    print(
        f"median on/off {ratio:.3f}: cost {cost * 100:+.1f}% (target <= {TARGET_COST * 100:.0f}%) "
        f"{'PASS' if cost <= TARGET_COST else 'FAIL'}"
    )
    print(
        f"on: page events received {page_events}, span exports "
        f"{sink.requests} ({sink.bytes} bytes), trace files {[p.name for p in traces]}"
    )
    return 0 if cost <= TARGET_COST else 1


if __name__ == "__main__":
    sys.exit(main())
