"""KServe v2 on plain OpenVINO models, through Triton's clients (REST and gRPC) and grpcio stubs.

Expected outputs are the same IR files run with openvino in this process.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.grpc.aio as triton_grpc_aio
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import KServeServer, Repository

FEATURES = 4
Client = Any  # tritonclient.grpc or tritonclient.http InferenceServerClient


@pytest.fixture(params=["grpc", "http"])
def client(request: pytest.FixtureRequest, grpc_client: Client, http_client: Client) -> Client:
    return grpc_client if request.param == "grpc" else http_client


def module_of(client: Client) -> Any:
    return triton_grpc if isinstance(client, triton_grpc.InferenceServerClient) else triton_http


def infer_input(client: Client, name: str, array: np.ndarray[Any, Any], **options: Any) -> Any:
    tensor = module_of(client).InferInput(name, list(array.shape), np_to_triton_dtype(array.dtype))
    tensor.set_data_from_numpy(array, **options)
    return tensor


def features(rows: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal((rows, FEATURES)).astype(np.float32)


# ----------------------------------------------------------------------- health and metadata


def test_health_and_server_metadata(client: Client) -> None:
    assert client.is_server_live()
    assert client.is_server_ready()
    metadata = client.get_server_metadata()
    name = metadata.name if hasattr(metadata, "name") else metadata["name"]
    assert name == "graphrt"


def test_model_readiness_by_name_and_version(client: Client) -> None:
    assert client.is_model_ready("echo")
    assert client.is_model_ready("linear", "1")
    assert client.is_model_ready("linear", "2")
    assert client.is_model_ready("pipeline")


def test_model_metadata_lists_versions_inputs_and_outputs(grpc_client: Client) -> None:
    metadata = grpc_client.get_model_metadata("linear")
    assert metadata.name == "linear"
    assert list(metadata.versions) == ["1", "2"]
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
        ("x", "FP32", [-1, FEATURES])
    ]
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.outputs] == [
        ("y", "FP32", [-1, 3])
    ]
    echo = grpc_client.get_model_metadata("echo", "1")
    assert {t.name: t.datatype for t in echo.inputs}["in_FP16"] == "FP16"


def test_model_metadata_over_rest(http_client: Client) -> None:
    metadata = http_client.get_model_metadata("echo")
    inputs = {t["name"]: (t["datatype"], t["shape"]) for t in metadata["inputs"]}
    assert inputs["in_BOOL"] == ("BOOL", [-1, 2])
    assert inputs["in_UINT64"] == ("UINT64", [-1, 2])
    assert metadata["versions"] == ["1"]


def test_graph_metadata_names_its_streams(http_client: Client) -> None:
    metadata = http_client.get_model_metadata("pipeline")
    assert [t["name"] for t in metadata["inputs"]] == ["values"]
    assert sorted(t["name"] for t in metadata["outputs"]) == ["label", "scores"]


# -------------------------------------------------------------------------------- inference


@pytest.fixture(scope="module")
def every_dtype(kserve_repository: Repository) -> dict[str, np.ndarray[Any, Any]]:
    """One [3, 2] array per datatype, integers at their extremes."""
    rng = np.random.default_rng(7)
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    for name, dtype in kserve_repository.dtypes.items():
        if dtype is np.bool_:
            arrays[f"in_{name}"] = rng.integers(0, 2, (3, 2)).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            arrays[f"in_{name}"] = np.array([[info.min, info.max], [0, 1], [7, 9]], dtype=dtype)
        else:
            arrays[f"in_{name}"] = rng.standard_normal((3, 2)).astype(dtype)
    return arrays


@pytest.mark.parametrize("transport", ["grpc", "http-binary", "http-json"])
def test_every_datatype_round_trips(
    transport: str,
    grpc_client: Client,
    http_client: Client,
    every_dtype: dict[str, np.ndarray[Any, Any]],
    kserve_repository: Repository,
) -> None:
    """Each datatype arrives as itself and returns what openvino alone returns for it.

    (Not always the input: the CPU plugin computes 64-bit types in 32 bits, so INT64 extremes and
    FP64 digits come back changed; the server must pass that on, not hide or worsen it.)
    """
    client = grpc_client if transport == "grpc" else http_client
    options = {} if transport == "grpc" else {"binary_data": transport == "http-binary"}
    arrays = every_dtype
    expected = kserve_repository.run("echo", 1, arrays)
    inputs = [infer_input(client, name, array, **options) for name, array in arrays.items()]
    result = client.infer("echo", inputs)
    for name, array in arrays.items():
        output = name.replace("in_", "out_")
        out = result.as_numpy(output)
        assert out.dtype == array.dtype, name
        np.testing.assert_array_equal(out, expected[output], err_msg=name)
        if array.dtype.itemsize < 8:
            np.testing.assert_array_equal(out, array, err_msg=name)


def test_typed_grpc_contents_are_accepted(
    kserve_server: KServeServer, kserve_repository: Repository
) -> None:
    """Not raw_input_contents: values in InferTensorContents, as some clients send them."""
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        x = features(2)
        request = pb.ModelInferRequest(model_name="linear", model_version="2")
        tensor = request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
        tensor.contents.fp32_contents.extend(x.ravel().tolist())
        response = stub.ModelInfer(request)
    y = np.frombuffer(response.raw_output_contents[0], dtype=np.float32).reshape(2, 3)
    assert response.model_version == "2"
    assert response.outputs[0].name == "y"
    assert list(response.outputs[0].shape) == [2, 3]
    np.testing.assert_allclose(y, run_linear(kserve_repository, "2", x), rtol=1e-5)


def test_versions_default_to_the_latest_and_can_be_chosen(
    client: Client, kserve_repository: Repository
) -> None:
    x = features(5, seed=1)
    for version in ("1", "2"):
        expected = run_linear(kserve_repository, version, x)
        got = client.infer("linear", [infer_input(client, "x", x)], model_version=version)
        np.testing.assert_allclose(got.as_numpy("y"), expected, rtol=1e-5, atol=1e-5)
    latest = client.infer("linear", [infer_input(client, "x", x)]).as_numpy("y")
    np.testing.assert_allclose(latest, run_linear(kserve_repository, "2", x), rtol=1e-5)
    assert not np.allclose(latest, run_linear(kserve_repository, "1", x))


def run_linear(repository: Repository, version: str, x: np.ndarray[Any, Any]) -> Any:
    return repository.run("linear", int(version), {"x": x})["y"]


def test_version_folders_are_picked_up_and_dropped(
    grpc_client: Client, growing_versions: Path, kserve_repository: Repository
) -> None:
    x = features(2)
    kserve_repository.save_linear_model(growing_versions / "7", seed=77)
    wait_until(lambda: grpc_client.is_model_ready("growing", "7"), "version 7 to load")
    newest = grpc_client.infer("growing", [infer_input(grpc_client, "x", x)])
    assert newest.get_response().model_version == "7"
    expected = kserve_repository.run("growing", 7, {"x": x})["y"]
    np.testing.assert_allclose(newest.as_numpy("y"), expected, rtol=1e-5)

    shutil.rmtree(growing_versions / "7")
    wait_until(
        lambda: (
            grpc_client.infer("growing", [infer_input(grpc_client, "x", x)])
            .get_response()
            .model_version
            == "1"
        ),
        "version 7 to unload",
    )
    with pytest.raises(InferenceServerException, match="NOT_FOUND"):
        grpc_client.infer("growing", [infer_input(grpc_client, "x", x)], model_version="7")


def wait_until(condition: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except InferenceServerException:
            pass
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def test_concurrent_requests_share_the_infer_request_pool(
    kserve_server: KServeServer, kserve_repository: Repository
) -> None:
    """32 requests at once over 2 infer requests: every answer belongs to its own input."""

    async def run() -> None:
        client = triton_grpc_aio.InferenceServerClient(kserve_server.grpc_url)
        try:
            batches = [features(3, seed=seed) for seed in range(32)]

            async def one(x: np.ndarray[Any, Any]) -> Any:
                tensor = triton_grpc_aio.InferInput("x", list(x.shape), "FP32")
                tensor.set_data_from_numpy(x)
                return (await client.infer("linear", [tensor], model_version="1")).as_numpy("y")

            results = await asyncio.gather(*(one(x) for x in batches))
        finally:
            await client.close()
        for x, y in zip(batches, results, strict=True):
            np.testing.assert_allclose(y, run_linear(kserve_repository, "1", x), rtol=1e-5)

    asyncio.run(run())


def test_requested_outputs_only(
    http_client: Client, every_dtype: dict[str, np.ndarray[Any, Any]]
) -> None:
    inputs = [infer_input(http_client, name, array) for name, array in every_dtype.items()]
    outputs = [triton_http.InferRequestedOutput("out_INT8", binary_data=False)]
    result = http_client.infer("echo", inputs, outputs=outputs)
    assert [o["name"] for o in result.get_response()["outputs"]] == ["out_INT8"]


def test_v1_config_reports_every_version(kserve_server: KServeServer) -> None:
    status = httpx.get(f"http://{kserve_server.rest_url}/v1/config").json()
    linear = status["linear"]["model_version_status"]
    assert [(v["version"], v["state"]) for v in linear] == [("2", "AVAILABLE"), ("1", "AVAILABLE")]
    assert status["pipeline"]["model_version_status"][0]["state"] == "AVAILABLE"
    assert status["classifier"]["model_version_status"][0]["state"] == "AVAILABLE"


# ----------------------------------------------------------------------------------- errors


def expect_grpc_error(code: grpc.StatusCode, text: str, call: Any) -> None:
    with pytest.raises(InferenceServerException) as caught:
        call()
    assert caught.value.status() == f"StatusCode.{code.name}", caught.value
    assert text in caught.value.message(), caught.value.message()


def rest_infer(kserve_server: KServeServer, model: str, body: Any, **kwargs: Any) -> httpx.Response:
    return httpx.post(
        f"http://{kserve_server.rest_url}/v2/models/{model}/infer",
        content=body if isinstance(body, bytes) else json.dumps(body).encode(),
        **kwargs,
    )


def test_unknown_model_and_version(grpc_client: Client, kserve_server: KServeServer) -> None:
    x = features(1)
    expect_grpc_error(
        grpc.StatusCode.NOT_FOUND,
        "Model with requested name is not found: nope",
        lambda: grpc_client.infer("nope", [infer_input(grpc_client, "x", x)]),
    )
    expect_grpc_error(
        grpc.StatusCode.NOT_FOUND,
        "Model with requested version is not found: linear 9",
        lambda: grpc_client.infer("linear", [infer_input(grpc_client, "x", x)], model_version="9"),
    )
    expect_grpc_error(
        grpc.StatusCode.NOT_FOUND,
        "not found",
        lambda: grpc_client.get_model_metadata("nope"),
    )
    response = httpx.get(f"http://{kserve_server.rest_url}/v2/models/nope")
    assert response.status_code == 404
    assert response.json() == {"error": "Model with requested name is not found: nope"}
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [0] * 4}]}
    response = httpx.post(
        f"http://{kserve_server.rest_url}/v2/models/linear/versions/9/infer", json=body
    )
    assert response.status_code == 404
    assert "version is not found" in response.json()["error"]


def test_wrong_datatype_shape_and_missing_input(
    grpc_client: Client, every_dtype: dict[str, np.ndarray[Any, Any]]
) -> None:
    expect_grpc_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "Invalid datatype of input x: got INT32, expected FP32",
        lambda: grpc_client.infer(
            "linear", [infer_input(grpc_client, "x", np.zeros((1, 4), np.int32))]
        ),
    )
    expect_grpc_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "Invalid shape of input x: got [1, 3], expected [-1, 4]",
        lambda: grpc_client.infer(
            "linear", [infer_input(grpc_client, "x", np.zeros((1, 3), np.float32))]
        ),
    )
    expect_grpc_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "Unexpected input: z",
        lambda: grpc_client.infer(
            "linear", [infer_input(grpc_client, "z", np.zeros((1, 4), np.float32))]
        ),
    )
    arrays = {name: array for name, array in every_dtype.items() if name != "in_INT16"}
    expect_grpc_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "Missing input: in_INT16",
        lambda: grpc_client.infer(
            "echo", [infer_input(grpc_client, n, a) for n, a in arrays.items()]
        ),
    )


def test_bad_raw_contents_size_over_grpc(kserve_server: KServeServer) -> None:
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="linear")
        request.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        request.raw_input_contents.append(b"\0" * 15)
        with pytest.raises(grpc.RpcError) as caught:
            stub.ModelInfer(request)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == (
        "Invalid content size of input x: got 15 bytes, expected 16 for shape [1, 4] of FP32"
    )


def test_bad_binary_data_sizes_over_rest(kserve_server: KServeServer) -> None:
    header = {
        "inputs": [
            {
                "name": "x",
                "datatype": "FP32",
                "shape": [1, 4],
                "parameters": {"binary_data_size": 16},
            }
        ]
    }
    json_part = json.dumps(header).encode()
    length = {"Inference-Header-Content-Length": str(len(json_part))}
    short = rest_infer(kserve_server, "linear", json_part + b"\0" * 12, headers=length)
    assert short.status_code == 400
    assert "Invalid binary_data_size of input x" in short.json()["error"]
    extra = rest_infer(kserve_server, "linear", json_part + b"\0" * 20, headers=length)
    assert extra.status_code == 400
    assert extra.json()["error"] == "4 bytes of binary data are not claimed by any input"
    wrong_size = json.dumps(
        {"inputs": [{**header["inputs"][0], "parameters": {"binary_data_size": 12}}]}
    ).encode()
    response = rest_infer(
        kserve_server,
        "linear",
        wrong_size + b"\0" * 12,
        headers={"Inference-Header-Content-Length": str(len(wrong_size))},
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("Invalid content size of input x: got 12 bytes")


def test_malformed_rest_bodies(kserve_server: KServeServer) -> None:
    cases = [
        (b"{not json", "The request body is not valid JSON"),
        (b"[]", "The request body must be a JSON object"),
        (b'{"inputs": []}', "inputs must be a non-empty array"),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2]}]}',
            "Input x holds 2 values, its shape [1, 4] needs 4",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], '
            b'"data": ["a", "b", "c", "d"]}]}',
            "Invalid data of input x: not FP32 values",
        ),
        (
            b'{"inputs": [{"name": "x", "datatype": "FP8", "shape": [1], "data": [1]}]}',
            "Unsupported datatype 'FP8' of input x",
        ),
    ]
    for body, message in cases:
        response = rest_infer(kserve_server, "linear", body)
        assert response.status_code == 400, body
        assert response.json()["error"].startswith(message), response.json()


def test_errors_do_not_disturb_other_requests(
    grpc_client: Client, kserve_repository: Repository
) -> None:
    x = features(2, seed=5)
    for _ in range(3):
        with pytest.raises(InferenceServerException):
            grpc_client.infer("linear", [infer_input(grpc_client, "x", x[:, :3].copy())])
    got = grpc_client.infer("linear", [infer_input(grpc_client, "x", x)], model_version="1")
    np.testing.assert_allclose(got.as_numpy("y"), run_linear(kserve_repository, "1", x), rtol=1e-5)


def test_models_added_to_and_removed_from_config_json(
    grpc_client: Client, kserve_repository: Repository
) -> None:
    """A config.json edit loads a new model entry, and removing it unloads the model."""
    original = kserve_repository.config.read_text()
    config = json.loads(original)
    config["model_config_list"].append(
        {"config": {"name": "late", "base_path": "linear", "model_version_policy": {"all": {}}}}
    )
    kserve_repository.config.write_text(json.dumps(config))
    try:
        wait_until(lambda: grpc_client.is_model_ready("late", "1"), "model late to load")
        x = features(1, seed=4)
        got = grpc_client.infer("late", [infer_input(grpc_client, "x", x)], model_version="1")
        np.testing.assert_allclose(
            got.as_numpy("y"), run_linear(kserve_repository, "1", x), rtol=1e-5
        )
    finally:
        kserve_repository.config.write_text(original)

    def gone() -> bool:
        try:
            grpc_client.is_model_ready("late")
        except InferenceServerException as error:
            return "NOT_FOUND" in str(error.status())
        return False

    wait_until(gone, "model late to unload")
    assert grpc_client.is_model_ready("linear", "2")
