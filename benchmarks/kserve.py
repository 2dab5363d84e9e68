"""KServe v2 serving overhead: a small OpenVINO model over gRPC and REST vs. openvino directly.

Builds a small MLP (x [1, 256] FP32 -> `--hidden` (256) -> ReLU -> 16) as IR (`--hidden 4096`
makes it 16x larger: still well under a millisecond per inference on CPU, so what is measured is
the serving path). Then, one after the other:

1. openvino alone, in this process: the compiled model on an `AsyncInferQueue` of `--nireq`
   infer requests kept full (concurrency 1: one synchronous request at a time) — the limit;
2. `graphrt serve --config_path ... --port ...` (a model_config_list entry with the same nireq),
   driven by Triton's asyncio clients with a closed loop of `--concurrency` requests in flight:
   gRPC (`tritonclient.grpc.aio`, raw tensor contents) and REST (`tritonclient.http.aio`, the
   binary-data extension).

Reports requests/s and p50/p99 latency per path and level, and each path's throughput as a
share of the direct run at the same level. The load generator runs on the same 2 cores as the
server, so its cost is part of what the ratio measures (as it would be for a sidecar client).

    python benchmarks/kserve.py [--concurrency 1 16] [--requests 2000] [--nireq 4]
        [--hidden 256] [--json F]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    """openvino alone; concurrency > 1 keeps an AsyncInferQueue of `nireq` requests full."""
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_xml), "CPU")
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


async def run_grpc(url: str, concurrency: int, requests: int) -> Result:
    import tritonclient.grpc.aio as triton

    client = triton.InferenceServerClient(url)
    tensor = triton.InferInput("x", [1, INPUT_SIZE], "FP32")
    tensor.set_data_from_numpy(inputs())

    async def call() -> None:
        (await client.infer(MODEL, [tensor])).as_numpy("y")

    try:
        await closed_loop(concurrency, 50, call)  # warm-up
        seconds, latencies = await closed_loop(concurrency, requests, call)
    finally:
        await client.close()
    return result("gRPC", concurrency, seconds, latencies)


async def run_rest(url: str, concurrency: int, requests: int) -> Result:
    import tritonclient.http.aio as triton

    client = triton.InferenceServerClient(url, conn_limit=max(concurrency, 1))
    tensor = triton.InferInput("x", [1, INPUT_SIZE], "FP32")
    tensor.set_data_from_numpy(inputs(), binary_data=True)
    output = triton.InferRequestedOutput("y", binary_data=True)

    async def call() -> None:
        (await client.infer(MODEL, [tensor], outputs=[output])).as_numpy("y")

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


class Server:
    """`graphrt serve` on free ports with a config.json serving the model."""

    def __init__(self, repository: Path, nireq: int) -> None:
        config = {
            "model_config_list": [{"config": {"name": MODEL, "base_path": MODEL, "nireq": nireq}}]
        }
        (repository / "config.json").write_text(json.dumps(config))
        self.rest_port, self.grpc_port = free_port(), free_port()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "graphruntime.server.cli",
                "serve",
                "--config_path",
                str(repository / "config.json"),
                "--rest_port",
                str(self.rest_port),
                "--port",
                str(self.grpc_port),
                "--log_level",
                "WARNING",
            ]
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                url = f"http://127.0.0.1:{self.rest_port}/v2/health/ready"
                with urllib.request.urlopen(url, timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise SystemExit("the server did not become ready in 60 s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def print_table(results: Sequence[Result]) -> None:
    direct = {r.concurrency: r.rps for r in results if r.path == "openvino"}
    print(f"{'path':<9} {'conc':>4} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'vs openvino':>12}")
    for r in results:
        share = r.rps / direct[r.concurrency] if r.concurrency in direct else float("nan")
        print(
            f"{r.path:<9} {r.concurrency:>4} {r.rps:>9.0f} {r.p50_ms:>8.3f} {r.p99_ms:>8.3f} "
            f"{share:>12.2f}"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--nireq", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256, help="hidden layer width")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        repository = Path(tmp)
        save_model(repository / MODEL / "1", args.hidden)
        for level in args.concurrency:
            results.append(
                run_direct(repository / MODEL / "1" / "model.xml", level, args.requests, args.nireq)
            )
        server = Server(repository, args.nireq)
        try:
            for level in args.concurrency:
                grpc_url = f"127.0.0.1:{server.grpc_port}"
                rest_url = f"127.0.0.1:{server.rest_port}"
                results.append(asyncio.run(run_grpc(grpc_url, level, args.requests)))
                results.append(asyncio.run(run_rest(rest_url, level, args.requests)))
        finally:
            server.stop()
    results.sort(key=lambda r: (r.concurrency, ["openvino", "gRPC", "REST"].index(r.path)))
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"rps": r.rps} for r in results], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
