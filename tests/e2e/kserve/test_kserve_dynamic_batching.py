"""Dynamic batching end to end: `graphrt serve` with a config.json that switches it on.

The repository holds one MLP IR built here, served twice from the same files: `mlp` with
dynamic_batching and `mlp_single` without (per-call inference, the reference), and a copy of the
MLP with a static batch of 1 (`mlp_static`, made dynamic at load). The MLP is large enough that
its inferences run on the model's threads, so while one runs, concurrent calls queue and are
stacked. Every result of a concurrent burst must equal, byte for byte, the same call's result from
`mlp_single`; /metrics must show batches of more than one call; a malformed call among good ones
must fail alone with the API's error (gRPC INVALID_ARGUMENT, REST 400).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np
import pytest
import tritonclient.grpc.aio as triton_grpc
import tritonclient.http.aio as triton_http
from tritonclient.utils import InferenceServerException

if TYPE_CHECKING:
    from conftest import LaunchExact

INPUTS = 512
HIDDEN = 8192  # ~16 MiB of weights: milliseconds per inference, so it runs on threads
OUTPUTS = 16
CLIENTS = 16
CALLS = 96


def save_mlp(directory: Path, batch: int = -1) -> None:
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    x = ops.parameter([batch, INPUTS], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    w1 = ops.constant(rng.standard_normal((INPUTS, HIDDEN)).astype(np.float32))
    w2 = ops.constant(rng.standard_normal((HIDDEN, OUTPUTS)).astype(np.float32))
    y = ops.matmul(ops.relu(ops.matmul(x, w1, False, False)), w2, False, False)
    y.output(0).get_tensor().set_names({"y"})
    directory.mkdir(parents=True, exist_ok=True)
    ov.save_model(
        ov.Model([ops.result(y)], [x], "mlp"), directory / "model.xml", compress_to_fp16=False
    )


@dataclass(frozen=True)
class BatchingServer:
    rest_url: str
    grpc_url: str


@pytest.fixture(scope="module")
def batching_server(
    tmp_path_factory: pytest.TempPathFactory,
    launch_exact: LaunchExact,
    unused_port: Callable[[], int],
) -> Iterator[BatchingServer]:
    root = tmp_path_factory.mktemp("batching_models")
    save_mlp(root / "mlp" / "1")
    save_mlp(root / "static" / "1", batch=1)
    batching = {"max_batch_size": 8, "max_queue_delay_microseconds": 2000}
    config = {
        "model_config_list": [
            {
                "config": {
                    "name": "mlp",
                    "base_path": "mlp",
                    "nireq": 2,
                    "dynamic_batching": batching,
                }
            },
            {"config": {"name": "mlp_single", "base_path": "mlp", "nireq": 2}},
            {"config": {"name": "mlp_static", "base_path": "static", "dynamic_batching": {}}},
        ]
    }
    (root / "config.json").write_text(json.dumps(config))
    grpc_port = unused_port()
    args = ["--config_path", str(root / "config.json"), "--port", str(grpc_port)]
    with launch_exact([*args, "--metrics_enable"], model="mlp") as server:
        yield BatchingServer(f"127.0.0.1:{server.port}", f"127.0.0.1:{grpc_port}")


def call_inputs(count: int) -> list[np.ndarray[Any, Any]]:
    """Calls of 1 to 3 rows, each with its own numbers."""
    rng = np.random.default_rng(5)
    return [rng.standard_normal((1 + i % 3, INPUTS)).astype(np.float32) for i in range(count)]


async def grpc_infer(client: Any, model: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    tensor = triton_grpc.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    result: np.ndarray[Any, Any] = (await client.infer(model, [tensor])).as_numpy("y")
    return result


async def rest_infer(client: Any, model: str, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    tensor = triton_http.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=True)
    output = triton_http.InferRequestedOutput("y", binary_data=True)
    result: np.ndarray[Any, Any] = (await client.infer(model, [tensor], outputs=[output])).as_numpy(
        "y"
    )
    return result


async def burst(infer: Callable[[Any], Any], inputs: list[Any]) -> list[Any]:
    """`CLIENTS` closed-loop callers sharing the calls; results (or errors) in input order."""
    results: list[Any] = [None] * len(inputs)
    pending = iter(range(len(inputs)))

    async def caller() -> None:
        for index in pending:
            try:
                results[index] = await infer(inputs[index])
            except InferenceServerException as error:
                results[index] = error

    await asyncio.gather(*(caller() for _ in range(CLIENTS)))
    return results


def batch_counts(server: BatchingServer, model: str) -> tuple[float, float]:
    """(batches, batches of one call) of `model` from /metrics."""
    text = httpx.get(f"http://{server.rest_url}/metrics").text
    labels = rf'name="{model}",version="1"'

    def value(pattern: str) -> float:
        found = re.search(pattern, text)
        assert found, f"{pattern} not in /metrics:\n{text}"
        return float(found.group(1))

    total = value(rf"graphrt_dynamic_batch_requests_count\{{{labels}\}} (\S+)")
    alone = value(rf'graphrt_dynamic_batch_requests_bucket\{{le="1\.0",{labels}\}} (\S+)')
    return total, alone


def expected(server: BatchingServer, inputs: list[np.ndarray[Any, Any]]) -> list[Any]:
    """Per-call inference: each call alone, one after the other, on the unbatched model."""

    async def run() -> list[Any]:
        client = triton_grpc.InferenceServerClient(server.grpc_url)
        try:
            return [await grpc_infer(client, "mlp_single", x) for x in inputs]
        finally:
            await client.close()

    return asyncio.run(run())


async def burst_over(server: BatchingServer, transport: str, inputs: list[Any]) -> list[Any]:
    """`burst` of calls to the mlp over one client of `transport` (grpc or rest)."""
    if transport == "grpc":
        client: Any = triton_grpc.InferenceServerClient(server.grpc_url)
        infer = grpc_infer
    else:
        client = triton_http.InferenceServerClient(server.rest_url, conn_limit=CLIENTS)
        infer = rest_infer
    try:
        return await burst(lambda x: infer(client, "mlp", x), inputs)
    finally:
        await client.close()


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_concurrent_calls_are_batched_with_bit_identical_results(
    batching_server: BatchingServer, transport: str
) -> None:
    inputs = call_inputs(CALLS)
    want = expected(batching_server, inputs)
    before = batch_counts(batching_server, "mlp")

    got = asyncio.run(burst_over(batching_server, transport, inputs))
    for x, reference, result in zip(inputs, want, got, strict=True):
        assert isinstance(result, np.ndarray), result
        assert result.shape == (x.shape[0], OUTPUTS)
        assert result.tobytes() == reference.tobytes()
    total, alone = batch_counts(batching_server, "mlp")
    batches, singles = total - before[0], alone - before[1]
    assert 0 < batches < CALLS, "every call ran alone: no batch was formed"
    assert singles < batches


@pytest.mark.parametrize("transport", ["grpc", "rest"])
def test_a_bad_call_among_good_ones_fails_alone(
    batching_server: BatchingServer, transport: str
) -> None:
    inputs: list[Any] = call_inputs(CLIENTS * 2)
    bad = len(inputs) // 2
    inputs[bad] = np.zeros((1, INPUTS + 1), np.float32)
    want = expected(batching_server, [x for i, x in enumerate(inputs) if i != bad])

    got = asyncio.run(burst_over(batching_server, transport, inputs))
    error = got.pop(bad)
    assert isinstance(error, InferenceServerException), error
    assert "Invalid shape of input x" in error.message()
    if transport == "grpc":
        assert error.status() == "StatusCode.INVALID_ARGUMENT"
    else:
        assert error.status() == "400"
    for reference, result in zip(want, got, strict=True):
        assert isinstance(result, np.ndarray), result
        assert result.tobytes() == reference.tobytes()


def test_a_static_batch_is_made_dynamic_at_load(batching_server: BatchingServer) -> None:
    metadata = httpx.get(f"http://{batching_server.rest_url}/v2/models/mlp_static").json()
    assert metadata["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, INPUTS]}]
    x = call_inputs(3)[2]  # three rows

    async def run() -> Any:
        client = triton_grpc.InferenceServerClient(batching_server.grpc_url)
        try:
            return await grpc_infer(client, "mlp_static", x)
        finally:
            await client.close()

    assert asyncio.run(run()).tobytes() == expected(batching_server, [x])[0].tobytes()
