"""Server vs. engine: streaming chat throughput and latency, measured back to back in one run.

For every concurrency level (default 1, 8, 32) this runs, one after the other and never at the
same time (the box has 2 cores):

1. the engine alone: an in-process openvino-genai ContinuousBatchingPipeline with the scheduler
   settings of the server's generated graph, driven by a closed loop of `add_request` + `step()` +
   `while can_read(): read()` (never a blocking read), with the prompts chat-templated and
   tokenized up front by the engine's tokenizer;
2. the server: `graphrt serve` (started here on a free port unless --server-url is given), driven
   by a closed-loop load generator of streaming chat completions (aiohttp, SSE parsed here, output
   tokens taken from the final usage chunk), while a probe process GETs /v2/health/ready every
   50 ms to show that the HTTP event loop is not stalled by the engine.

Both sides use the same fixed prompts, `max_tokens` (max_new_tokens), ignore_eos and greedy
decoding, and report vLLM benchmark_serving.py-style metrics: request and token throughput, TTFT
(start to first content), TPOT ((latency - TTFT) / (output tokens - 1)) and ITL (gaps between
content chunks; per step on the engine side). The final table gives per level the server/engine
output-throughput ratio, the TTFT medians and the probe latencies, next to their targets.

The probe also runs while the in-process engine is measured (the server is then idle): that
baseline is the latency the CPU contention alone causes (2 cores, engine threads busy), so a probe
p99 far above it under server load means the server's event loop itself was busy.

Each side first runs every prompt once (8 tokens) as a warm-up, so both start with the same warm
prefix cache. The in-process engine stays loaded but idle while the server runs. The load
generator shares the CPUs with the server, so its cost is part of what the ratio measures.

The machine may be shared: after every run a CPU line gives the seconds used by this process, the
server frontend, its engine worker and everything else ("others", plus hypervisor steal), and the
table shows the others' share. With `--rounds N` every level runs N engine/server pairs and the
table shows medians (ratios and differences are taken per pair).

    python benchmarks/serving.py [--model PATH.gguf] [--server-url URL | --start-server]
        [--server-pids PID ...] [--concurrency 1 8 32] [--num-prompts N] [--max-tokens 128]
        [--rounds 1] [--skip-engine] [--cache-size GB] [--json out.json] [--quiet]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import http.client
import importlib
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

SYSTEM = "You are a helpful assistant. Answer clearly and concisely."

# A small fixed set of realistic chat prompts of different lengths (the server chat-templates
# them; the engine side applies the engine tokenizer's template to the same messages).
PROMPTS: list[list[dict[str, str]]] = [
    [{"role": "user", "content": "What is the capital of France, and what is it famous for?"}],
    [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Explain the difference between a process and a thread."},
    ],
    [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "Write a short story about a robot who learns to paint. Give the robot a "
            "name, describe its first attempt at painting a sunset, and end with a lesson about "
            "patience.",
        },
    ],
    [{"role": "user", "content": "Give me three tips for writing readable Python code."}],
    [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": "I am planning a three-day trip to Rome in spring. I like history, good "
            "food and walking, but I do not like crowded places. Suggest an itinerary with one "
            "main sight per morning, a relaxed afternoon activity and a dinner area each day.",
        },
    ],
    [{"role": "user", "content": "Summarize how photosynthesis works for a ten-year-old."}],
    [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "What are the pros and cons of electric cars?"},
        {
            "role": "assistant",
            "content": "Pros: low running costs, no tailpipe emissions, quiet. Cons: higher "
            "purchase price, charging time, limited range on long trips.",
        },
        {"role": "user", "content": "Which of the cons matter most for someone in a city?"},
    ],
    [
        {
            "role": "user",
            "content": "Translate to French and explain any idioms: 'It is raining cats and "
            "dogs, so let's call it a day and hit the sack early.'",
        }
    ],
]

WARMUP_TOKENS = 8
PROBE_PATH = "/v2/health/ready"
PROBE_INTERVAL = 0.05
CHAT_PATH = "/v3/chat/completions"

# Targets printed next to the results (issue 14).
TARGET_RATIO = 0.95  # server / engine output tok/s, at every concurrency
TARGET_TTFT_MS = 5.0  # server TTFT p50 at concurrency 1 <= engine + this
TARGET_TTFT_FACTOR = 1.15  # server TTFT p50 above concurrency 1 <= engine x this
TARGET_PROBE_P99_MS = 20.0  # health probe p99 under the highest load


# --------------------------------------------------------------------------------------- results


@dataclass
class RequestResult:
    ok: bool
    prompt_tokens: int = 0
    output_tokens: int = 0
    ttft: float = 0.0  # seconds
    latency: float = 0.0
    itl: list[float] = field(default_factory=list)
    error: str = ""
    # One of the first `concurrency` requests, sent at once to an idle engine; the later ones
    # are each sent as an earlier one ends.
    first_wave: bool = False


@dataclass
class LevelMetrics:
    """What vLLM's benchmark_serving.py prints, times in ms."""

    concurrency: int
    completed: int
    failed: int
    duration_s: float
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    output_throughput: float
    total_token_throughput: float
    mean_ttft_ms: float
    median_ttft_ms: float
    p99_ttft_ms: float
    # TTFT medians of the first wave and of the later requests: the median of all falls on the
    # edge between the two (with num_prompts = 2 x concurrency), so it moves with their balance.
    first_wave_ttft_ms: float
    later_ttft_ms: float
    mean_tpot_ms: float
    median_tpot_ms: float
    p99_tpot_ms: float
    mean_itl_ms: float
    median_itl_ms: float
    p99_itl_ms: float
    short_outputs: int  # completed requests with fewer output tokens than max_tokens
    errors: list[str]


@dataclass
class ProbeStats:
    count: int
    failures: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def _stats_ms(values: Sequence[float]) -> tuple[float, float, float]:
    if not values:
        return 0.0, 0.0, 0.0
    array = np.asarray(values, dtype=np.float64) * 1e3
    return float(np.mean(array)), float(np.median(array)), float(np.percentile(array, 99))


def summarize(
    results: Sequence[RequestResult], duration: float, concurrency: int, max_tokens: int
) -> LevelMetrics:
    good = [r for r in results if r.ok]
    ttft = _stats_ms([r.ttft for r in good])
    first_wave_ttft = _stats_ms([r.ttft for r in good if r.first_wave])[1]
    later_ttft = _stats_ms([r.ttft for r in good if not r.first_wave])[1]
    tpot = _stats_ms(
        [(r.latency - r.ttft) / (r.output_tokens - 1) for r in good if r.output_tokens > 1]
    )
    itl = _stats_ms([gap for r in good for gap in r.itl])
    inputs = sum(r.prompt_tokens for r in good)
    outputs = sum(r.output_tokens for r in good)
    errors = sorted({r.error for r in results if not r.ok})
    return LevelMetrics(
        concurrency=concurrency,
        completed=len(good),
        failed=len(results) - len(good),
        duration_s=duration,
        total_input_tokens=inputs,
        total_output_tokens=outputs,
        request_throughput=len(good) / duration,
        output_throughput=outputs / duration,
        total_token_throughput=(inputs + outputs) / duration,
        mean_ttft_ms=ttft[0],
        median_ttft_ms=ttft[1],
        p99_ttft_ms=ttft[2],
        first_wave_ttft_ms=first_wave_ttft,
        later_ttft_ms=later_ttft,
        mean_tpot_ms=tpot[0],
        median_tpot_ms=tpot[1],
        p99_tpot_ms=tpot[2],
        mean_itl_ms=itl[0],
        median_itl_ms=itl[1],
        p99_itl_ms=itl[2],
        short_outputs=sum(1 for r in good if r.output_tokens < max_tokens),
        errors=errors[:5],
    )


def print_metrics(title: str, m: LevelMetrics) -> None:
    print("{s:{c}^60}".format(s=f" {title} ", c="="))
    rows: list[tuple[str, str]] = [
        ("Successful requests:", f"{m.completed}"),
        ("Failed requests:", f"{m.failed}"),
        ("Maximum request concurrency:", f"{m.concurrency}"),
        ("Benchmark duration (s):", f"{m.duration_s:.2f}"),
        ("Total input tokens:", f"{m.total_input_tokens}"),
        ("Total generated tokens:", f"{m.total_output_tokens}"),
        ("Request throughput (req/s):", f"{m.request_throughput:.2f}"),
        ("Output token throughput (tok/s):", f"{m.output_throughput:.2f}"),
        ("Total Token throughput (tok/s):", f"{m.total_token_throughput:.2f}"),
    ]
    for label, value in rows:
        print(f"{label:<40}{value:>20}")
    for name, key, unit in (
        ("Time to First Token", "ttft", "TTFT"),
        ("Time per Output Token (excl. 1st token)", "tpot", "TPOT"),
        ("Inter-token Latency", "itl", "ITL"),
    ):
        print("{s:{c}^60}".format(s=name, c="-"))
        for stat in ("mean", "median", "p99"):
            label = f"{'P99' if stat == 'p99' else stat.capitalize()} {unit} (ms):"
            print(f"{label:<40}{getattr(m, f'{stat}_{key}_ms'):>20.2f}")
    if m.short_outputs:
        print(f"WARNING: {m.short_outputs} requests produced fewer tokens than max_tokens")
    for error in m.errors:
        print(f"ERROR: {error}")
    print("=" * 60)


async def closed_loop(
    concurrency: int, num_prompts: int, one: Callable[[int], Awaitable[RequestResult]]
) -> tuple[list[RequestResult], float]:
    """`concurrency` workers, each sending its next request as soon as the previous one ends."""
    indices: Iterator[int] = iter(range(num_prompts))
    results: list[RequestResult] = []

    async def worker() -> None:
        for index in indices:
            result = await one(index)
            result.first_wave = index < concurrency
            results.append(result)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, num_prompts))))
    return results, time.perf_counter() - started


# ---------------------------------------------------------------------------------------- server


def chat_payload(model: str, messages: list[dict[str, str]], max_tokens: int) -> dict[str, Any]:
    return {
        "model": model,
        "messages": messages,
        "max_completion_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


async def stream_chat(
    session: aiohttp.ClientSession, url: str, payload: dict[str, Any]
) -> RequestResult:
    """One streaming chat completion; TTFT and ITL from non-empty content deltas."""
    result = RequestResult(ok=False)
    usage: dict[str, Any] | None = None
    last = 0.0
    started = time.perf_counter()
    try:
        async with session.post(url, json=payload) as response:
            if response.status != 200:
                result.error = f"HTTP {response.status}: {(await response.text())[:200]}"
                return result
            async for raw in response.content:
                line = raw.strip()
                if not line.startswith(b"data:"):
                    continue
                data = line[5:].strip()
                if data == b"[DONE]":
                    break
                now = time.perf_counter()
                chunk = json.loads(data)
                if "error" in chunk:
                    result.error = f"stream error: {str(chunk['error'])[:200]}"
                    return result
                for choice in chunk.get("choices") or ():
                    if (choice.get("delta") or {}).get("content"):
                        if result.ttft == 0.0:
                            result.ttft = now - started
                        else:
                            result.itl.append(now - last)
                        last = now
                if chunk.get("usage"):
                    usage = chunk["usage"]
        result.latency = time.perf_counter() - started
    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as error:
        result.error = f"{type(error).__name__}: {error}"
        return result
    if usage is None:
        result.error = "no usage chunk in the stream"
    elif result.ttft == 0.0:
        result.error = "no content in the stream"
    else:
        result.prompt_tokens = int(usage.get("prompt_tokens", 0))
        result.output_tokens = int(usage.get("completion_tokens", 0))
        result.ok = True
    return result


class HealthProbe(threading.Thread):
    """GETs the readiness endpoint at a fixed rate on its own keep-alive connection.

    Runs in a process of its own (see ProbeProcess): neither the load generator's event loop nor
    the in-process engine's GIL-holding step() can then delay it.
    """

    def __init__(self, base_url: str, interval: float = PROBE_INTERVAL) -> None:
        super().__init__(name="health-probe", daemon=True)
        parsed = urllib.parse.urlsplit(base_url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self.interval = interval
        self.samples: list[float] = []
        self.failures = 0
        self.done = threading.Event()

    def run(self) -> None:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
        deadline = time.perf_counter()
        while not self.done.is_set():
            started = time.perf_counter()
            try:
                connection.request("GET", PROBE_PATH)
                response = connection.getresponse()
                response.read()
                elapsed = time.perf_counter() - started
                if response.status == 200:
                    self.samples.append(elapsed)
                else:
                    self.failures += 1
            except (OSError, http.client.HTTPException):
                self.failures += 1
                connection.close()
                connection = http.client.HTTPConnection(self.host, self.port, timeout=10)
            deadline = max(deadline + self.interval, time.perf_counter())
            self.done.wait(deadline - time.perf_counter())
        connection.close()

    def stop(self) -> None:
        self.done.set()
        self.join()


def _probe_main(base_url: str, connection: Connection) -> None:
    probe = HealthProbe(base_url)
    probe.start()
    connection.send("started")
    connection.recv()
    probe.stop()
    connection.send((probe.samples, probe.failures))


class ProbeProcess:
    """A HealthProbe in a spawned process; `stop()` returns its latencies (s) and failures."""

    def __init__(self, base_url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(
            target=_probe_main, args=(base_url, child), name="health-probe", daemon=True
        )
        self.process.start()
        child.close()
        if not self.connection.poll(60) or self.connection.recv() != "started":
            raise RuntimeError("the health probe process did not start")

    def stop(self) -> tuple[list[float], int]:
        self.connection.send("stop")
        samples, failures = self.connection.recv()
        self.process.join()
        self.connection.close()
        return list(samples), int(failures)


def probe_stats(samples: Sequence[float], failures: int) -> ProbeStats:
    values = np.asarray(samples or [0.0], dtype=np.float64) * 1e3
    return ProbeStats(
        count=len(samples),
        failures=failures,
        p50_ms=float(np.median(values)),
        p99_ms=float(np.percentile(values, 99)),
        max_ms=float(np.max(values)),
    )


async def run_server_level(
    base_url: str,
    model: str,
    concurrency: int,
    num_prompts: int,
    max_tokens: int,
    path: str = CHAT_PATH,
    force_close: bool = False,
) -> tuple[list[RequestResult], float]:
    """The closed loop against the server; `force_close` opens a connection per request (for
    servers that drop idle keep-alive connections, which aiohttp would reuse and fail on)."""
    url = base_url + path
    connector = aiohttp.TCPConnector(limit=0, force_close=force_close)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=600)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def one(index: int) -> RequestResult:
            payload = chat_payload(model, PROMPTS[index % len(PROMPTS)], max_tokens)
            return await stream_chat(session, url, payload)

        return await closed_loop(concurrency, num_prompts, one)


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc; 0 where unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listening_pid(base_url: str) -> int | None:
    """The local process listening on the URL's port (Linux /proc), for --server-url."""
    parsed = urllib.parse.urlsplit(base_url)
    if parsed.hostname not in ("127.0.0.1", "localhost", "::1", "0.0.0.0") or not parsed.port:
        return None
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table, encoding="ascii") as file:
            for line in file.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == parsed.port:
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for process in Path("/proc").iterdir():
        if not process.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for fd in (process / "fd").iterdir():
                with contextlib.suppress(OSError):
                    if os.readlink(fd) in inodes:
                        return int(process.name)
    return None


def child_pids(pid: int) -> list[int]:
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            children.extend(int(child) for child in task.read_text().split())
    return children


def system_cpu() -> tuple[float, float]:
    """Busy and steal seconds of the whole machine so far (Linux /proc/stat; 0 elsewhere)."""
    try:
        with open("/proc/stat", encoding="ascii") as file:
            values = [int(v) for v in file.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    values += [0] * (8 - len(values))
    user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
    tick = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / tick, steal / tick


@dataclass
class CpuUse:
    """CPU seconds spent during one run, per process and machine-wide."""

    wall_s: float
    benchmark_s: float  # this process: the load generator or the in-process engine
    frontend_s: float | None = None
    engine_worker_s: float | None = None
    machine_busy_s: float = 0.0  # all processes
    steal_s: float = 0.0  # taken by the hypervisor

    @property
    def others_pct(self) -> float:
        """Share of the machine's CPU time (all cores) other processes used."""
        return 100 * self.others_s / (self.wall_s * (os.cpu_count() or 1))

    @property
    def others_s(self) -> float:
        ours = self.benchmark_s + (self.frontend_s or 0.0) + (self.engine_worker_s or 0.0)
        return max(0.0, self.machine_busy_s - ours)

    def describe(self) -> str:
        capacity = self.wall_s * (os.cpu_count() or 1) / 100  # seconds per percent

        def part(label: str, seconds: float) -> str:
            return f"{label} {seconds:.1f} s ({seconds / capacity:.0f}%)"

        parts = [part("this process", self.benchmark_s)]
        if self.frontend_s is not None:
            parts.append(part("server frontend", self.frontend_s))
        if self.engine_worker_s is not None:
            parts.append(part("engine worker", self.engine_worker_s))
        others = "other processes" if self.frontend_s is not None else "others (incl. server)"
        parts.append(part(others, self.others_s))
        parts.append(part("steal", self.steal_s))
        return f"CPU over {self.wall_s:.1f} s x {os.cpu_count()} cores: " + ", ".join(parts)


class CpuMeter:
    """Measures this process, the machine and, if known, the server(s) and their engine workers
    (several servers, e.g. replicas behind a proxy, are summed)."""

    def __init__(self, server_pids: Sequence[int]) -> None:
        self.server_pids = list(server_pids)
        self.workers = [child for pid in self.server_pids for child in child_pids(pid)]

    def snapshot(self) -> tuple[float, ...]:
        times = os.times()
        frontend = sum(cpu_seconds(pid) for pid in self.server_pids)
        engine = sum(cpu_seconds(pid) for pid in self.workers)
        busy, steal = system_cpu()
        return time.perf_counter(), times.user + times.system, frontend, engine, busy, steal

    def since(self, start: tuple[float, ...]) -> CpuUse:
        now = self.snapshot()
        delta = [b - a for a, b in zip(start, now, strict=True)]
        use = CpuUse(delta[0], delta[1], machine_busy_s=delta[4], steal_s=delta[5])
        if self.server_pids:
            use.frontend_s = delta[2]
            use.engine_worker_s = delta[3] if self.workers else None
        return use


class BackgroundServer:
    """A server program in a subprocess on a free port, its log in a temporary file."""

    def __init__(self, label: str, command: Callable[[int], list[str]], ready_path: str) -> None:
        self.label = label
        self.ready_path = ready_path
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed in stop())
            prefix=label.replace(" ", "-") + "-", suffix=".log", delete=False
        )
        arguments = command(self.port)
        print(f"starting: {' '.join(arguments)}  (log: {self.log.name})", flush=True)
        self.process = subprocess.Popen(arguments, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 300.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"{self.label} exited with {self.process.returncode}; see {self.log.name}"
                )
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=2) as response:
                    if response.status == 200:
                        return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"{self.label} not ready after {timeout:.0f} s; see {self.log.name}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=45)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


class ServerProcess(BackgroundServer):
    """`graphrt serve` in a subprocess."""

    def __init__(self, model: Path, name: str, extra: Sequence[str]) -> None:
        def command(port: int) -> list[str]:
            return [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "serve",
                "--model_path",
                str(model),
                "--model_name",
                name,
                "--rest_port",
                str(port),
                *extra,
            ]

        super().__init__("graphrt serve", command, PROBE_PATH)


def model_name_from(base_url: str) -> str:
    with urllib.request.urlopen(base_url + "/v3/models", timeout=10) as response:
        models = json.load(response)
    names = [str(item["id"]) for item in models.get("data", [])]
    if not names:
        raise RuntimeError(f"{base_url}/v3/models lists no models; pass --model-name")
    return names[0]


# ---------------------------------------------------------------------------------------- engine


@dataclass
class _Running:
    handle: Any
    started: float
    prompt_tokens: int
    first_wave: bool
    first: float = 0.0
    last: float = 0.0
    tokens: int = 0
    itl: list[float] = field(default_factory=list)


def server_scheduler(cache_size: int = 0, max_num_batched_tokens: int = 256) -> dict[str, Any]:
    """The scheduler of the graph `graphrt serve --model_path` generates (OVMS's defaults)."""
    return {
        "cache_size": cache_size,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": 256,
        "dynamic_split_fuse": True,
        "enable_prefix_caching": True,
    }


def server_properties(device: str) -> dict[str, Any]:
    """The properties the server's engine process gives genai for a graph without plugin_config
    (CPU pinning off on a CPU: servables/llm/engine/pipeline.py)."""
    from servables.llm.engine.pipeline import with_engine_defaults

    return with_engine_defaults(device, {})


def scheduler_config(scheduler: dict[str, Any]) -> Any:
    """An openvino-genai SchedulerConfig with these settings (see `server_scheduler`)."""
    genai: Any = importlib.import_module("openvino_genai")
    config = genai.SchedulerConfig()
    for name, value in scheduler.items():
        setattr(config, name, value)
    return config


class Engine:
    """The server's engine, in process, with the generated graph's scheduler settings."""

    def __init__(
        self, model: Path, scheduler: dict[str, Any], device: str, properties: dict[str, Any]
    ) -> None:
        genai: Any = importlib.import_module("openvino_genai")
        started = time.perf_counter()
        self.pipeline: Any = genai.ContinuousBatchingPipeline(
            str(model), scheduler_config(scheduler), device, properties
        )
        print(f"engine loaded in {time.perf_counter() - started:.1f} s", flush=True)
        self.status: Any = genai.GenerationStatus
        tokenizer = self.pipeline.get_tokenizer()
        self.prompts: list[Any] = []
        self.prompt_lengths: list[int] = []
        for messages in PROMPTS:
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
            ids = tokenizer.encode(text, add_special_tokens=False).input_ids  # [1, N] int64
            self.prompts.append(ids)
            self.prompt_lengths.append(int(ids.get_shape()[1]))
        self.next_id = 0

    def generation_config(self, max_tokens: int) -> Any:
        config = self.pipeline.get_config()
        config.max_new_tokens = max_tokens
        config.ignore_eos = True
        config.do_sample = False
        config.validate()
        return config

    def run(
        self, concurrency: int, num_prompts: int, max_tokens: int
    ) -> tuple[list[RequestResult], float]:
        """Closed loop: refill to `concurrency`, step, drain every handle without blocking."""
        config = self.generation_config(max_tokens)
        pipeline = self.pipeline
        status = self.status
        running: dict[int, _Running] = {}
        results: list[RequestResult] = []
        issued = 0
        started = time.perf_counter()
        while issued < num_prompts or running:
            while len(running) < concurrency and issued < num_prompts:
                index = issued % len(self.prompts)
                request_id = self.next_id
                self.next_id += 1
                begin = time.perf_counter()
                handle = pipeline.add_request(request_id, self.prompts[index], config)
                running[request_id] = _Running(
                    handle, begin, self.prompt_lengths[index], issued < concurrency
                )
                issued += 1
            pipeline.step()
            now = time.perf_counter()
            for request_id, request in list(running.items()):
                handle = request.handle
                while handle.can_read():
                    for output in handle.read().values():
                        count = len(output.generated_ids)
                        if not count:
                            continue
                        if request.tokens == 0:
                            request.first = now
                        else:
                            request.itl.append(now - request.last)
                        request.last = now
                        request.tokens += count
                state = handle.get_status()
                if state == status.RUNNING:
                    continue
                del running[request_id]
                ok = state == status.FINISHED and request.tokens > 0
                results.append(
                    RequestResult(
                        ok=ok,
                        prompt_tokens=request.prompt_tokens,
                        output_tokens=request.tokens,
                        ttft=request.first - request.started,
                        latency=now - request.started,
                        itl=request.itl,
                        error="" if ok else f"engine request ended with status {state}",
                        first_wave=request.first_wave,
                    )
                )
        return results, time.perf_counter() - started


# ------------------------------------------------------------------------------------------ main


@dataclass
class RoundReport:
    """One back-to-back pair: the engine run, then the server run."""

    engine: LevelMetrics | None = None
    engine_cpu: CpuUse | None = None
    server: LevelMetrics | None = None
    server_cpu: CpuUse | None = None
    probe: ProbeStats | None = None  # while the server is loaded
    idle_probe: ProbeStats | None = None  # while the engine runs in process, the server idle


@dataclass
class LevelSummary:
    """Medians over the rounds of one concurrency level (ratios and differences per round)."""

    server_output_tps: float
    engine_output_tps: float | None
    ratio: float | None
    server_ttft_p50_ms: float
    engine_ttft_p50_ms: float | None
    ttft_p50_diff_ms: float | None
    # (first wave, later requests) TTFT medians, server and engine
    server_ttft_waves_ms: tuple[float, float]
    engine_ttft_waves_ms: tuple[float, float] | None
    server_tpot_p50_ms: float
    engine_tpot_p50_ms: float | None
    probe: ProbeStats  # pooled over the rounds
    idle_probe: ProbeStats | None
    # CPU share other processes on the machine took (noise indicator), server / engine runs
    server_others_pct: float | None
    engine_others_pct: float | None
    # the server frontend's CPU (its own process, not the engine worker) per completed request
    frontend_ms_per_request: float | None = None


@dataclass
class LevelReport:
    concurrency: int
    num_prompts: int
    rounds: list[RoundReport] = field(default_factory=list)
    summary: LevelSummary | None = None


def _median(values: Sequence[float]) -> float:
    return float(np.median(np.asarray(values, dtype=np.float64)))


def _others(uses: Sequence[CpuUse | None]) -> float | None:
    shares = [
        u.others_pct for u in uses if u is not None and u.wall_s > 0 and u.frontend_s is not None
    ]
    return _median(shares) if shares else None


def summarize_level(
    rounds: Sequence[RoundReport], probe: ProbeStats, idle_probe: ProbeStats | None
) -> LevelSummary:
    servers = [r.server for r in rounds if r.server is not None]
    pairs = [
        (r.server, r.engine)
        for r in rounds
        if r.server is not None and r.engine is not None and r.engine.output_throughput > 0
    ]

    def both(pick: Callable[[LevelMetrics], float]) -> tuple[float, float | None]:
        engine = _median([pick(e) for _, e in pairs]) if pairs else None
        return _median([pick(s) for s in servers]), engine

    server_tps, engine_tps = both(lambda m: m.output_throughput)
    server_ttft, engine_ttft = both(lambda m: m.median_ttft_ms)
    server_tpot, engine_tpot = both(lambda m: m.median_tpot_ms)
    server_first, engine_first = both(lambda m: m.first_wave_ttft_ms)
    server_later, engine_later = both(lambda m: m.later_ttft_ms)
    return LevelSummary(
        server_output_tps=server_tps,
        engine_output_tps=engine_tps,
        ratio=_median([s.output_throughput / e.output_throughput for s, e in pairs])
        if pairs
        else None,
        server_ttft_p50_ms=server_ttft,
        engine_ttft_p50_ms=engine_ttft,
        ttft_p50_diff_ms=_median([s.median_ttft_ms - e.median_ttft_ms for s, e in pairs])
        if pairs
        else None,
        server_ttft_waves_ms=(server_first, server_later),
        engine_ttft_waves_ms=None
        if engine_first is None or engine_later is None
        else (engine_first, engine_later),
        server_tpot_p50_ms=server_tpot,
        engine_tpot_p50_ms=engine_tpot,
        probe=probe,
        idle_probe=idle_probe,
        server_others_pct=_others([r.server_cpu for r in rounds]),
        engine_others_pct=_others([r.engine_cpu for r in rounds]),
        frontend_ms_per_request=_frontend_per_request(rounds),
    )


def _frontend_per_request(rounds: Sequence[RoundReport]) -> float | None:
    costs = [
        1e3 * r.server_cpu.frontend_s / r.server.completed
        for r in rounds
        if r.server is not None
        and r.server.completed
        and r.server_cpu is not None
        and r.server_cpu.frontend_s is not None
    ]
    return _median(costs) if costs else None


def _mark(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def print_summary(levels: Sequence[LevelReport], target_level: int, rounds: int) -> dict[str, Any]:
    """The comparison table; returns the pass/fail verdicts for the JSON output."""
    verdicts: dict[str, Any] = {}
    width = 128
    title = " graphrt server vs. engine, back to back"
    title += f" (medians of {rounds} rounds) " if rounds > 1 else " "
    print()
    print("{s:{c}^{w}}".format(s=title, c="=", w=width))
    print(
        f"{'conc':>4} {'server tok/s':>12} {'engine tok/s':>12} {'ratio':>6} {'':<14}"
        f"{'TTFT p50 srv':>12} {'engine':>8} {'diff':>10} {'':<18}{'TPOT p50 srv/eng':>18}"
        f"{'others srv/eng':>16}"
    )
    for level in levels:
        m = level.summary
        if m is None:
            continue
        ratio_target = ttft_target = ""
        if m.ratio is not None:
            verdict = m.ratio >= TARGET_RATIO
            verdicts[f"ratio_at_{level.concurrency}"] = {"value": m.ratio, "pass": verdict}
            ratio_target = f" >= {TARGET_RATIO} {_mark(verdict)}"
        if level.concurrency == 1 and m.ttft_p50_diff_ms is not None:
            verdict = m.ttft_p50_diff_ms <= TARGET_TTFT_MS
            verdicts["ttft_p50_diff_at_1_ms"] = {"value": m.ttft_p50_diff_ms, "pass": verdict}
            ttft_target = f" <= +{TARGET_TTFT_MS:.0f} ms {_mark(verdict)}"
        elif m.engine_ttft_p50_ms:
            factor = m.server_ttft_p50_ms / m.engine_ttft_p50_ms
            verdict = factor <= TARGET_TTFT_FACTOR
            verdicts[f"ttft_p50_factor_at_{level.concurrency}"] = {"value": factor, "pass": verdict}
            ttft_target = f" x{factor:.2f}<={TARGET_TTFT_FACTOR} {_mark(verdict)}"
        tpot = f"{m.server_tpot_p50_ms:.1f}/{_fmt(m.engine_tpot_p50_ms, '.1f')} ms"
        others = f"{_fmt(m.server_others_pct, '.0f', '%')}/{_fmt(m.engine_others_pct, '.0f', '%')}"
        print(
            f"{level.concurrency:>4} {m.server_output_tps:>12.1f} "
            f"{_fmt(m.engine_output_tps, '.1f'):>12} {_fmt(m.ratio, '.3f'):>6} "
            f"{ratio_target:<14}{m.server_ttft_p50_ms:>12.1f} "
            f"{_fmt(m.engine_ttft_p50_ms, '.1f'):>8} {_fmt(m.ttft_p50_diff_ms, '+.1f', ' ms'):>10} "
            f"{ttft_target:<18}{tpot:>18}{others:>16}"
        )
    print(
        "others: CPU share (all cores) used by processes outside this benchmark and the server "
        "during the runs; above ~10% the numbers are noisy (use --rounds)"
    )
    print(
        "TTFT p50 by wave, server / engine: the first wave (`conc` requests sent at once to the "
        "idle engine) | the later requests (each sent as an earlier one ended)"
    )
    for level in levels:
        if level.summary is None:
            continue
        first, later = level.summary.server_ttft_waves_ms
        engine_first, engine_later = level.summary.engine_ttft_waves_ms or (None, None)
        later_target = ""
        if engine_later and level.concurrency > 1:
            factor = later / engine_later
            verdict = factor <= TARGET_TTFT_FACTOR
            key = f"later_ttft_p50_factor_at_{level.concurrency}"
            verdicts[key] = {"value": factor, "pass": verdict}
            later_target = f" x{factor:.2f}<={TARGET_TTFT_FACTOR} {_mark(verdict)}"
        frontend = _fmt(level.summary.frontend_ms_per_request, ".1f", " ms")
        print(
            f"{level.concurrency:>4}  first wave {first:.1f} / {_fmt(engine_first, '.1f')} ms"
            f"  |  later {later:.1f} / {_fmt(engine_later, '.1f')} ms{later_target}"
            f"  |  frontend CPU per request {frontend}"
        )
    print("-" * width)
    interval_ms = PROBE_INTERVAL * 1e3
    print(
        f"health probe, GET {PROBE_PATH} every {interval_ms:.0f} ms from another process; "
        "baseline: server idle while the engine runs in process"
    )
    for level in levels:
        if level.summary is None:
            continue
        probe = level.summary.probe
        target = ""
        if level.concurrency == target_level:
            verdict = probe.p99_ms < TARGET_PROBE_P99_MS and probe.failures == 0
            verdicts[f"probe_p99_at_{target_level}_ms"] = {"value": probe.p99_ms, "pass": verdict}
            target = f"  (target p99 < {TARGET_PROBE_P99_MS:.0f} ms {_mark(verdict)})"
        idle = level.summary.idle_probe
        baseline = (
            f";  baseline p50 {idle.p50_ms:.2f} p99 {idle.p99_ms:.2f} max {idle.max_ms:.1f}"
            if idle
            else ""
        )
        print(
            f"{level.concurrency:>4}  n={probe.count:<5} failed={probe.failures:<3} ms: "
            f"p50 {probe.p50_ms:.2f} p99 {probe.p99_ms:.2f} max {probe.max_ms:.1f}{target}"
            f"{baseline}"
        )
    print("=" * width)
    return verdicts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="graphrt serving benchmark: server vs. in-process engine, back to back.",
    )
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--server-url", help="benchmark a running server (e.g. http://host:8000)")
    target.add_argument(
        "--start-server",
        action="store_true",
        help="start `graphrt serve` on a free port (the default without --server-url)",
    )
    parser.add_argument(
        "--server-pids",
        type=int,
        nargs="+",
        help="with --server-url: the server processes whose CPU to report, e.g. the replicas "
        "behind a load balancer (default: the local process listening on the URL's port)",
    )
    parser.add_argument(
        "--model-name",
        help="served model name (default: bench, or the first model of --server-url)",
    )
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument(
        "--num-prompts",
        type=int,
        help="requests per concurrency level and round (default: max(2 x concurrency, 8))",
    )
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="engine/server pairs per level; the table shows medians (default 1)",
    )
    parser.add_argument("--skip-engine", action="store_true", help="measure the server only")
    parser.add_argument(
        "--cache-size", type=int, default=0, help="KV cache GB for both (default 0: grow on demand)"
    )
    parser.add_argument("--max-num-batched-tokens", type=int, default=256)
    parser.add_argument("--device", default="CPU")
    parser.add_argument("--json", type=Path, help="also write all results here")
    parser.add_argument(
        "--quiet", action="store_true", help="print only the final table and CPU lines"
    )
    args = parser.parse_args(argv)
    if args.server_pids and not args.server_url:
        parser.error("--server-pids needs --server-url")
    if any(level < 1 for level in args.concurrency):
        parser.error("--concurrency values must be >= 1")
    if args.max_tokens < 2:
        parser.error("--max-tokens must be >= 2")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    levels = list(dict.fromkeys(args.concurrency))
    target_level = 32 if 32 in levels else max(levels)
    model: Path | None = args.model
    if model is None and (args.server_url is None or not args.skip_engine):
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    scheduler = server_scheduler(args.cache_size, args.max_num_batched_tokens)
    print(
        f"model: {model}\nlevels: {levels}, rounds: {args.rounds}, max_tokens: {args.max_tokens}"
        f"\nscheduler: {scheduler}\nload average before: {load_average()} (1/5/15 min)",
        flush=True,
    )

    engine: Engine | None = None
    server: ServerProcess | None = None
    reports: list[LevelReport] = []
    failed = 0
    try:
        if not args.skip_engine:
            assert model is not None
            engine = Engine(model, scheduler, args.device, server_properties(args.device))
            warm, _ = engine.run(1, len(PROMPTS), WARMUP_TOKENS)
            print(f"engine warm-up: {sum(r.ok for r in warm)}/{len(warm)} ok", flush=True)
        if args.server_url:
            base_url = args.server_url.rstrip("/")
            name = args.model_name or model_name_from(base_url)
        else:
            assert model is not None
            name = args.model_name or "bench"
            extra = [
                "--cache_size", str(args.cache_size),
                "--max_num_batched_tokens", str(args.max_num_batched_tokens),
                "--target_device", args.device,
            ]  # fmt: skip
            server = ServerProcess(model, name, extra)
            server.wait_ready()
            base_url = server.url
            print(f"server ready at {base_url} (pid {server.process.pid})", flush=True)
        warm, _ = asyncio.run(run_server_level(base_url, name, 1, len(PROMPTS), WARMUP_TOKENS))
        print(f"server warm-up: {sum(r.ok for r in warm)}/{len(warm)} ok", flush=True)
        for error in sorted({r.error for r in warm if not r.ok}):
            print(f"server warm-up error: {error}")

        if server is not None:
            server_pids = [server.process.pid]
        elif args.server_pids:
            server_pids = args.server_pids
        else:
            listening = listening_pid(base_url)
            server_pids = [listening] if listening else []
        meter = CpuMeter(server_pids)
        for concurrency in levels:
            count = args.num_prompts or max(2 * concurrency, 8)
            report = LevelReport(concurrency, count)
            samples: list[float] = []
            idle_samples: list[float] = []
            probe_failures = idle_failures = 0
            for round_index in range(args.rounds):
                tag = f"concurrency {concurrency}" + (
                    f", round {round_index + 1}/{args.rounds}" if args.rounds > 1 else ""
                )
                result = RoundReport()
                if engine is not None:
                    gc.collect()
                    prober = ProbeProcess(base_url)
                    mark = meter.snapshot()
                    results, duration = engine.run(concurrency, count, args.max_tokens)
                    result.engine_cpu = meter.since(mark)
                    taken, failures = prober.stop()
                    result.idle_probe = probe_stats(taken, failures)
                    idle_samples += taken
                    idle_failures += failures
                    result.engine = summarize(results, duration, concurrency, args.max_tokens)
                    failed += result.engine.failed
                    if not args.quiet:
                        print_metrics(f"engine, {tag}", result.engine)
                    print(f"engine {tag}: {result.engine_cpu.describe()}", flush=True)
                    time.sleep(1.0)  # let the machine settle before the other side
                gc.collect()
                prober = ProbeProcess(base_url)
                mark = meter.snapshot()
                results, duration = asyncio.run(
                    run_server_level(base_url, name, concurrency, count, args.max_tokens)
                )
                result.server_cpu = meter.since(mark)
                taken, failures = prober.stop()
                result.probe = probe_stats(taken, failures)
                samples += taken
                probe_failures += failures
                result.server = summarize(results, duration, concurrency, args.max_tokens)
                failed += result.server.failed
                if not args.quiet:
                    print_metrics(f"server, {tag}", result.server)
                print(f"server {tag}: {result.server_cpu.describe()}", flush=True)
                report.rounds.append(result)
                time.sleep(1.0)
            report.summary = summarize_level(
                report.rounds,
                probe_stats(samples, probe_failures),
                probe_stats(idle_samples, idle_failures) if engine is not None else None,
            )
            reports.append(report)
    finally:
        if server is not None:
            server.stop()
        if engine is not None:
            del engine
            gc.collect()

    for report in reports:
        for result in report.rounds:
            s, e = result.server, result.engine
            if s and e and s.total_input_tokens * e.completed != e.total_input_tokens * s.completed:
                print(
                    f"NOTE: prompt tokens differ at concurrency {report.concurrency}: server "
                    f"{s.total_input_tokens}, engine {e.total_input_tokens} (chat templates?)"
                )
    print(f"load average after: {load_average()} (1/5/15 min)")
    verdicts = print_summary(reports, target_level, args.rounds)
    if args.json:
        payload = {
            "config": {
                "model": str(model) if model else None,
                "server_url": args.server_url,
                "server_pids": args.server_pids,
                "concurrency": levels,
                "num_prompts": args.num_prompts,
                "rounds": args.rounds,
                "max_tokens": args.max_tokens,
                "scheduler": scheduler,
                "cpus": os.cpu_count(),
            },
            "levels": [asdict(report) for report in reports],
            "targets": verdicts,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"results written to {args.json}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
