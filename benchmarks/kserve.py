"""KServe v2 serving overhead: a small OpenVINO model over gRPC and REST vs. openvino directly.

Builds a small MLP (x [1, 256] FP32 -> `--hidden` (256) -> ReLU -> 16) as IR (`--hidden 4096`
makes it 16x larger: still well under a millisecond per inference on CPU, so what is measured is
the serving path). Then, one after the other:

1. openvino alone, in this process: the compiled model on an `AsyncInferQueue` of `--nireq`
   infer requests kept full (concurrency 1: one synchronous request at a time) — the limit;
2. the transports' own limit: this script started again as a bare server (`--bare-server`) in
   its own process, with a do-nothing grpc.aio servicer and a bare aiohttp handler on one event
   loop (as `graphrt serve` has them), each answering every infer with a prebuilt response of the
   model's output shape (raw contents over gRPC, the binary-data extension over REST), driven by
   the same clients as below: what the server would reach if its own per-request work were free;
3. `graphrt serve --config_path ... --port ...` (a model_config_list entry with the same nireq),
   driven by Triton's asyncio clients with a closed loop of `--concurrency` requests in flight:
   gRPC (`tritonclient.grpc.aio`, raw tensor contents) and REST (`tritonclient.http.aio`, the
   binary-data extension).

With `--dynamic-batching` it instead compares, in one server and one run, the model served
per call (`mlp`) with the same files under dynamic batching (`mlp_batched`: `max_batch_size`
`--max-batch-size`, `max_queue_delay_microseconds` `--queue-delay-us`), interleaved per level and
transport, and checks the targets of issue 29: at the highest level >= 2x the calls/s of per-call
inference with a p99 within per-call's plus the queue delay plus one inference (see
`batching_table`), and at 1 client a p50 within 5% of per-call's.

Reports requests/s and p50/p99 latency per path and level, each path's throughput as a share of
the direct run at the same level, and each server path's share of its transport's limit (the
target is >= 0.7). The load generator runs on the same 2 cores as the server, so its cost is
part of what the ratios measure (as it would be for a sidecar client).

    python benchmarks/kserve.py [--concurrency 1 16] [--requests 2000] [--nireq 4]
        [--hidden 256] [--rounds 1] [--json F]
        [--dynamic-batching [--max-batch-size 16] [--queue-delay-us 500]
            [--max-concurrent-batches N]]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

INPUT_SIZE = 256
OUTPUTS = 16
MODEL = "mlp"
BATCHED = "mlp_batched"  # the same files with dynamic_batching (--dynamic-batching)


def save_model(directory: Path, hidden: int) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    x = ops.parameter([-1, INPUT_SIZE], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    w1 = ops.constant(rng.standard_normal((INPUT_SIZE, hidden)).astype(np.float32))
    w2 = ops.constant(rng.standard_normal((hidden, OUTPUTS)).astype(np.float32))
    y = ops.matmul(ops.relu(ops.matmul(x, w1, False, False)), w2, False, False)
    y.output(0).get_tensor().set_names({"y"})
    directory.mkdir(parents=True, exist_ok=True)
    ov.save_model(ov.Model([ops.result(y)], [x], MODEL), directory / "model.xml")


@dataclass
class Result:
    path: str
    concurrency: int
    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_us: float | None = None  # the server process's CPU time per request
    mean_batch_calls: float | None = None  # --dynamic-batching: calls per batched inference

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


def result(path: str, concurrency: int, seconds: float, latencies: Sequence[float]) -> Result:
    ms = np.array(latencies) * 1000
    return Result(
        path,
        concurrency,
        len(latencies),
        seconds,
        float(np.percentile(ms, 50)),
        float(np.percentile(ms, 99)),
    )


def inputs() -> np.ndarray[Any, Any]:
    return np.random.default_rng(1).standard_normal((1, INPUT_SIZE)).astype(np.float32)


def run_direct(model_xml: Path, concurrency: int, requests: int, nireq: int) -> Result:
    """openvino alone; concurrency > 1 keeps an AsyncInferQueue of `nireq` requests full.

    Compiled with the properties the server gives a model without plugin_config."""
    import openvino as ov

    from servables.ov_model.model import compile_properties

    compiled = ov.Core().compile_model(str(model_xml), "CPU", compile_properties("CPU", {}))
    x = inputs()
    latencies: list[float] = []
    if concurrency == 1:
        request = compiled.create_infer_request()
        started = time.perf_counter()
        for _ in range(requests):
            begin = time.perf_counter()
            request.infer({"x": x})
            latencies.append(time.perf_counter() - begin)
        return result("openvino", 1, time.perf_counter() - started, latencies)
    queue = ov.AsyncInferQueue(compiled, min(nireq, concurrency))
    lock = threading.Lock()

    def done(_: Any, begin: float) -> None:
        with lock:
            latencies.append(time.perf_counter() - begin)

    queue.set_callback(done)
    started = time.perf_counter()
    for _ in range(requests):
        queue.start_async({"x": x}, time.perf_counter())
    queue.wait_all()
    return result("openvino", concurrency, time.perf_counter() - started, latencies)


async def closed_loop(
    concurrency: int, requests: int, call: Callable[[], Awaitable[None]]
) -> tuple[float, list[float]]:
    latencies: list[float] = []
    remaining = requests

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            begin = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - begin)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started, latencies


async def run_grpc(url: str, concurrency: int, requests: int, model: str = MODEL) -> Result:
    import tritonclient.grpc.aio as triton

    client = triton.InferenceServerClient(url)
    tensor = triton.InferInput("x", [1, INPUT_SIZE], "FP32")
    tensor.set_data_from_numpy(inputs())

    async def call() -> None:
        (await client.infer(model, [tensor])).as_numpy("y")

    try:
        await closed_loop(concurrency, 50, call)  # warm-up
        seconds, latencies = await closed_loop(concurrency, requests, call)
    finally:
        await client.close()
    return result("gRPC", concurrency, seconds, latencies)


async def run_rest(url: str, concurrency: int, requests: int, model: str = MODEL) -> Result:
    import tritonclient.http.aio as triton

    client = triton.InferenceServerClient(url, conn_limit=max(concurrency, 1))
    tensor = triton.InferInput("x", [1, INPUT_SIZE], "FP32")
    tensor.set_data_from_numpy(inputs(), binary_data=True)
    output = triton.InferRequestedOutput("y", binary_data=True)

    async def call() -> None:
        (await client.infer(model, [tensor], outputs=[output])).as_numpy("y")

    try:
        await closed_loop(concurrency, 50, call)
        seconds, latencies = await closed_loop(concurrency, requests, call)
    finally:
        await client.close()
    return result("REST", concurrency, seconds, latencies)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(rest_port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with code {process.returncode}")
        try:
            url = f"http://127.0.0.1:{rest_port}/v2/health/ready"
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    process.terminate()
    raise SystemExit(f"{what} did not become ready in 60 s")


class Server:
    """`graphrt serve` on free ports with a config.json serving the model."""

    def __init__(
        self, repository: Path, nireq: int, batching: dict[str, Any] | None = None
    ) -> None:
        models: list[dict[str, Any]] = [
            {"config": {"name": MODEL, "base_path": MODEL, "nireq": nireq}}
        ]
        if batching is not None:
            batched = {"name": BATCHED, "base_path": MODEL, "nireq": nireq}
            models.append({"config": batched | {"dynamic_batching": batching}})
        config = {"model_config_list": models}
        (repository / "config.json").write_text(json.dumps(config))
        self.rest_port, self.grpc_port = free_port(), free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graphrt.cli.main",
                "serve",
                "--config_path",
                str(repository / "config.json"),
                "--rest_port",
                str(self.rest_port),
                "--port",
                str(self.grpc_port),
                "--log_level",
                "WARNING",
                *(["--metrics_enable"] if batching is not None else []),
            ]
        )
        wait_ready(self.rest_port, self.process, "graphrt serve")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


class BareServer(Server):
    """This script with --bare-server: the transports alone (see `serve_bare`)."""

    def __init__(self) -> None:
        self.rest_port, self.grpc_port = free_port(), free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--bare-server",
                "--rest-port",
                str(self.rest_port),
                "--grpc-port",
                str(self.grpc_port),
            ]
        )
        wait_ready(self.rest_port, self.process, "the bare server")


# ------------------------------------------------------------------------- the transports' limit


async def serve_bare(rest_port: int, grpc_port: int) -> None:
    """A do-nothing KServe server: the same transports `graphrt serve` uses (grpc.aio and aiohttp
    on one asyncio loop, the same generated servicer and message size options), answering every
    ModelInfer with a prebuilt response of the model's output shape and datatype."""
    import grpc
    from aiohttp import web

    from graphrt.kserve import grpc_predict_v2_pb2 as pb
    from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

    output = np.zeros((1, OUTPUTS), dtype=np.float32).tobytes()
    grpc_response = pb.ModelInferResponse(model_name=MODEL, model_version="1")
    grpc_response.outputs.add(name="y", datatype="FP32", shape=[1, OUTPUTS])
    grpc_response.raw_output_contents.append(output)

    class Servicer(pb_grpc.GRPCInferenceServiceServicer):
        async def ModelInfer(self, request: Any, context: Any) -> Any:
            return grpc_response

    limit = 64 * 2**20
    options = [
        ("grpc.max_receive_message_length", limit),
        ("grpc.max_send_message_length", limit),
    ]
    server = grpc.aio.server(options=options)
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(Servicer(), server)  # type: ignore[no-untyped-call]
    server.add_insecure_port(f"127.0.0.1:{grpc_port}")
    await server.start()

    header = json.dumps(
        {
            "model_name": MODEL,
            "model_version": "1",
            "outputs": [
                {
                    "name": "y",
                    "datatype": "FP32",
                    "shape": [1, OUTPUTS],
                    "parameters": {"binary_data_size": len(output)},
                }
            ],
        }
    ).encode()
    rest_body = header + output
    rest_headers = {"Inference-Header-Content-Length": str(len(header))}

    async def infer(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(
            body=rest_body, content_type="application/octet-stream", headers=rest_headers
        )

    async def ready(request: web.Request) -> web.Response:
        return web.Response()

    app = web.Application(client_max_size=limit)
    app.router.add_post("/v2/models/{name}/infer", infer)
    app.router.add_get("/v2/health/ready", ready)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", rest_port).start()
    await asyncio.Event().wait()  # until terminated


# ----------------------------------------------------------------------------------- report

PATHS = ["openvino", "gRPC limit", "gRPC", "REST limit", "REST"]
TARGET_SHARE_OF_LIMIT = 0.7


def share(results: Sequence[Result], path: str, of: str, level: int) -> float | None:
    mine = [r.rps for r in results if r.path == path and r.concurrency == level]
    base = [r.rps for r in results if r.path == of and r.concurrency == level]
    if not mine or not base:
        return None
    # Rounds pair up in order: the median of the per-round ratios.
    return float(np.median([a / b for a, b in zip(mine, base, strict=False)]))


def print_table(results: Sequence[Result], rounds: int) -> dict[str, Any]:
    verdicts: dict[str, Any] = {}
    levels = sorted({r.concurrency for r in results})
    title = f" KServe v2, medians of {rounds} rounds " if rounds > 1 else " KServe v2 "
    print("{s:{c}^80}".format(s=title, c="="))
    print(
        f"{'path':<11} {'conc':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'vs openvino':>12} {'vs limit':>9} {'server CPU/req':>15}"
    )
    for level in levels:
        for path in PATHS:
            runs = [r for r in results if r.path == path and r.concurrency == level]
            if not runs:
                continue
            rps = float(np.median([r.rps for r in runs]))
            p50 = float(np.median([r.p50_ms for r in runs]))
            p99 = float(np.median([r.p99_ms for r in runs]))
            direct = share(results, path, "openvino", level)
            limit = ""
            if path in ("gRPC", "REST"):
                value = share(results, path, f"{path} limit", level)
                if value is not None:
                    ok = value >= TARGET_SHARE_OF_LIMIT
                    verdicts[f"{path}_at_{level}_vs_limit"] = {"value": value, "pass": ok}
                    limit = f"{value:.2f} {'PASS' if ok else 'FAIL'}"
            cpu = [r.server_cpu_us for r in runs if r.server_cpu_us is not None]
            cpu_text = f"{float(np.median(cpu)):.0f} us" if cpu else ""
            print(
                f"{path:<11} {level:>4} {rps:>9.0f} {p50:>8.3f} {p99:>8.3f} "
                f"{(direct if direct is not None else float('nan')):>12.2f} {limit:>9} "
                f"{cpu_text:>15}"
            )
    print(
        f"vs limit: the server's req/s over the bare transport's in the same round (target "
        f">= {TARGET_SHARE_OF_LIMIT}); server CPU/req: the serving process's CPU time per request "
        "(steadier than req/s on a shared machine)"
    )
    return verdicts


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    server: Server, label: str, levels: Sequence[int], requests: int, into: list[Result]
) -> None:
    for level in levels:
        grpc_url = f"127.0.0.1:{server.grpc_port}"
        rest_url = f"127.0.0.1:{server.rest_port}"
        for run, path in ((run_grpc, "gRPC"), (run_rest, "REST")):
            # Warm-up and measured requests both count: the share of CPU per request.
            before = cpu_seconds(server.process.pid)
            found = asyncio.run(run(grpc_url if path == "gRPC" else rest_url, level, requests))
            found.server_cpu_us = (cpu_seconds(server.process.pid) - before) / (requests + 50) * 1e6
            found.path = f"{path}{label}"
            into.append(found)


# ------------------------------------------------------------------------ dynamic batching

BATCHING_SPEEDUP_TARGET = 2.0
BATCHING_ONE_CLIENT_TOLERANCE = 0.05


def direct_batch_ms(model_xml: Path, rows: int, runs: int = 50) -> float:
    """One inference of a full batch, openvino alone (the fastest of `runs`): the "one
    inference" of the p99 target."""
    import openvino as ov

    from servables.ov_model.model import compile_properties

    compiled = ov.Core().compile_model(str(model_xml), "CPU", compile_properties("CPU", {}))
    request = compiled.create_infer_request()
    x = np.repeat(inputs(), rows, axis=0)
    times = []
    for _ in range(runs):
        begin = time.perf_counter()
        request.infer({"x": x})
        times.append(time.perf_counter() - begin)
    return min(times) * 1000


def measure_batching(
    server: Server, bare: Server, levels: Sequence[int], requests: int, into: list[Result]
) -> None:
    """Per-call, batched and the bare transport, interleaved: each level and transport runs
    the three back to back."""
    for level in levels:
        for run, path in ((run_grpc, "gRPC"), (run_rest, "REST")):
            for target, model, label in (
                (server, MODEL, "per-call"),
                (server, BATCHED, "batched"),
                (bare, MODEL, "limit"),
            ):
                port = target.grpc_port if path == "gRPC" else target.rest_port
                counted = batch_counts(server) if label == "batched" else (0.0, 0.0)
                before = cpu_seconds(target.process.pid)
                found = asyncio.run(run(f"127.0.0.1:{port}", level, requests, model))
                cpu = cpu_seconds(target.process.pid) - before
                found.server_cpu_us = cpu / (requests + 50) * 1e6
                found.path = f"{path} {label}"
                if label == "batched":
                    batches, calls = (
                        a - b for a, b in zip(batch_counts(server), counted, strict=True)
                    )
                    found.mean_batch_calls = calls / batches if batches else None
                into.append(found)


def batch_counts(server: Server) -> tuple[float, float]:
    """(batches, calls) of the batched model so far, from /metrics."""
    url = f"http://127.0.0.1:{server.rest_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    labels = f'{{name="{BATCHED}",version="1"}}'
    values = {}
    for line in text.splitlines():
        for metric in ("graphrt_dynamic_batches_total", "graphrt_dynamic_batch_calls_total"):
            if line.startswith(metric + labels):
                values[metric] = float(line.split()[-1])
    return values["graphrt_dynamic_batches_total"], values["graphrt_dynamic_batch_calls_total"]


def batching_table(
    results: Sequence[Result], rounds: int, delay_ms: float, batch_ms: float
) -> dict[str, Any]:
    """The comparison and the targets: at the highest level, batched calls/s >= 2x per-call's
    and batched p99 <= per-call p99 at that level + the queue delay + one full-batch inference
    (with the load generator and the transports on the same cores, most of the tail at 16
    clients is their CPU queueing, which batching does not add: what it may add is the wait for
    company and the batch's own inference); at 1 client, batched p50 within 5% of per-call's."""
    verdicts: dict[str, Any] = {}
    levels = sorted({r.concurrency for r in results})
    title = " dynamic batching" + (f", medians of {rounds} rounds " if rounds > 1 else " ")
    print("{s:{c}^80}".format(s=title, c="="))
    print(
        f"{'path':<17} {'conc':>4} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'x per-call':>10} {'server CPU/call':>16} {'calls/batch':>12}"
    )

    def median(path: str, level: int, key: str) -> float | None:
        values = [getattr(r, key) for r in results if r.path == path and r.concurrency == level]
        values = [v for v in values if v is not None]
        return float(np.median(values)) if values else None

    for transport in ("gRPC", "REST"):
        single = f"{transport} per-call"
        batched = f"{transport} batched"
        for level in levels:
            for path in (single, batched, f"{transport} limit"):
                rps = median(path, level, "rps")
                if rps is None:
                    continue
                ratio = share(results, path, single, level)
                cpu = median(path, level, "server_cpu_us")
                mean = median(path, level, "mean_batch_calls")
                print(
                    f"{path:<17} {level:>4} {rps:>9.0f} {median(path, level, 'p50_ms'):>8.3f} "
                    f"{median(path, level, 'p99_ms'):>8.3f} {ratio or float('nan'):>10.2f} "
                    f"{(f'{cpu:.0f} us' if cpu is not None else ''):>16} "
                    f"{(f'{mean:.1f}' if mean is not None else ''):>12}"
                )
        top = max(levels)
        speedup = share(results, batched, single, top)
        if speedup is not None and top > 1:
            ok = speedup >= BATCHING_SPEEDUP_TARGET
            verdicts[f"{transport}_batched_speedup_at_{top}"] = {"value": speedup, "pass": ok}
        base_p99 = median(single, top, "p99_ms")
        p99 = median(batched, top, "p99_ms")
        if base_p99 is not None and p99 is not None and top > 1:
            bound = base_p99 + delay_ms + batch_ms
            verdicts[f"{transport}_batched_p99_at_{top}_ms"] = {
                "value": p99,
                "bound": bound,
                "pass": p99 <= bound,
            }
        one = [
            a.p50_ms / b.p50_ms
            for a, b in zip(
                [r for r in results if r.path == batched and r.concurrency == 1],
                [r for r in results if r.path == single and r.concurrency == 1],
                strict=False,
            )
        ]
        if one:
            value = float(np.median(one))
            ok = value <= 1 + BATCHING_ONE_CLIENT_TOLERANCE
            verdicts[f"{transport}_batched_p50_at_1_vs_per_call"] = {"value": value, "pass": ok}
    print(
        "x per-call: calls/s over per-call's at the same level, same round; limit: the bare "
        "transport (a do-nothing servicer, see --bare-server), what no model can exceed.\n"
        f"One full-batch inference (openvino alone): {batch_ms:.3f} ms; queue delay "
        f"{delay_ms:.3f} ms"
    )
    for name, verdict in verdicts.items():
        extra = f" (bound {verdict['bound']:.3f})" if "bound" in verdict else ""
        print(f"  {name}: {verdict['value']:.3f}{extra} {'PASS' if verdict['pass'] else 'FAIL'}")
    return verdicts


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--nireq", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256, help="hidden layer width")
    parser.add_argument("--rounds", type=int, default=1, help="limit/server pairs (medians)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--dynamic-batching",
        action="store_true",
        help="compare per-call inference with dynamic batching (instead of the default report)",
    )
    parser.add_argument("--max-batch-size", type=int, default=16)
    parser.add_argument("--queue-delay-us", type=int, default=500)
    parser.add_argument(
        "--max-concurrent-batches", type=int, help="default: the server's (the model's streams)"
    )
    parser.add_argument("--bare-server", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--rest-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--grpc-port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.bare_server:
        asyncio.run(serve_bare(args.rest_port, args.grpc_port))
        return 0
    print(f"load: {' '.join(Path('/proc/loadavg').read_text().split()[:3])} (1/5/15 min)")
    if args.dynamic_batching:
        return compare_batching(args)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp)
        save_model(repository / MODEL / "1", args.hidden)
        model_xml = repository / MODEL / "1" / "model.xml"
        bare = BareServer()
        server = Server(repository, args.nireq)
        try:
            for _ in range(args.rounds):
                for level in args.concurrency:
                    results.append(run_direct(model_xml, level, args.requests, args.nireq))
                measure(bare, " limit", args.concurrency, args.requests, results)
                measure(server, "", args.concurrency, args.requests, results)
        finally:
            server.stop()
            bare.stop()
    print(f"load: {' '.join(Path('/proc/loadavg').read_text().split()[:3])} (1/5/15 min)")
    verdicts = print_table(results, args.rounds)
    if args.json:
        args.json.write_text(
            json.dumps(
                {"results": [asdict(r) | {"rps": r.rps} for r in results], "targets": verdicts},
                indent=2,
            )
        )
    return 0


def compare_batching(args: argparse.Namespace) -> int:
    """`--dynamic-batching`: one server serving the model per call and batched, interleaved."""
    results: list[Result] = []
    batching = {
        "max_batch_size": args.max_batch_size,
        "max_queue_delay_microseconds": args.queue_delay_us,
    }
    if args.max_concurrent_batches is not None:
        batching["max_concurrent_batches"] = args.max_concurrent_batches
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp)
        save_model(repository / MODEL / "1", args.hidden)
        batch_ms = direct_batch_ms(repository / MODEL / "1" / "model.xml", args.max_batch_size)
        bare = BareServer()
        server = Server(repository, args.nireq, batching)
        try:
            for _ in range(args.rounds):
                measure_batching(server, bare, args.concurrency, args.requests, results)
        finally:
            server.stop()
            bare.stop()
    print(f"load: {' '.join(Path('/proc/loadavg').read_text().split()[:3])} (1/5/15 min)")
    print(
        f"model: MLP {INPUT_SIZE} -> {args.hidden} -> {OUTPUTS}, nireq {args.nireq}; "
        f"dynamic_batching {json.dumps(batching)}"
    )
    verdicts = batching_table(results, args.rounds, args.queue_delay_us / 1000, batch_ms)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "results": [asdict(r) | {"rps": r.rps} for r in results],
                    "targets": verdicts,
                    "batch_ms": batch_ms,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
