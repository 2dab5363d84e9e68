"""Graphs as KServe servables: user calculators around a model, streams, side packets, failures."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from tritonclient.utils import InferenceServerException

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import KServeServer, Repository

Array = np.ndarray[Any, Any]


def tensor(module: Any, name: str, array: Array, datatype: str | None = None) -> Any:
    from tritonclient.utils import np_to_triton_dtype

    result = module.InferInput(name, list(array.shape), datatype or np_to_triton_dtype(array.dtype))
    result.set_data_from_numpy(array)
    return result


# --------------------------------------------------------- user calculators around a model


def expected_pipeline(repository: Repository, values: Array) -> tuple[Array, Array]:
    """What the graph should compute: standardize (numpy), the model run directly, argmax."""
    mean = values.mean(axis=-1, keepdims=True)
    std = values.std(axis=-1, keepdims=True) + 1e-6
    standardized = ((values - mean) / std).astype(np.float32)
    scores = repository.run("pipeline/classifier", 1, {"x": standardized})["y"]
    return scores, np.argmax(scores, axis=-1)


@pytest.mark.parametrize("protocol", [triton_grpc, triton_http], ids=["grpc", "http"])
def test_pipeline_of_user_calculators_and_a_model(
    protocol: Any, grpc_client: Any, http_client: Any, kserve_repository: Repository
) -> None:
    client = grpc_client if protocol is triton_grpc else http_client
    values = np.random.default_rng(3).uniform(0, 10, (6, 4)).astype(np.float32)
    result = client.infer("pipeline", [tensor(protocol, "values", values)])
    scores, labels = expected_pipeline(kserve_repository, values)
    np.testing.assert_allclose(result.as_numpy("scores"), scores, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(result.as_numpy("label"), labels)
    assert result.as_numpy("label").dtype == np.int64


def test_graph_output_selection(http_client: Any, kserve_repository: Repository) -> None:
    values = np.ones((1, 4), np.float32) + np.arange(4, dtype=np.float32)
    outputs = [triton_http.InferRequestedOutput("label", binary_data=False)]
    result = http_client.infer("pipeline", [tensor(triton_http, "values", values)], outputs=outputs)
    assert [o["name"] for o in result.get_response()["outputs"]] == ["label"]
    np.testing.assert_array_equal(
        result.as_numpy("label"), expected_pipeline(kserve_repository, values)[1]
    )


def test_graph_input_errors(grpc_client: Any) -> None:
    values = np.ones((1, 4), np.float32)
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("pipeline", [tensor(triton_grpc, "pixels", values)])
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert caught.value.message() == "Unexpected input: pixels; graph pipeline takes values"
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("pipeline", [tensor(triton_grpc, "values", values[:, :3].copy())])
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert caught.value.message() == "Invalid shape of input x: got [1, 3], expected [-1, 4]"


def test_bytes_and_request_parameters_as_side_packets(http_client: Any, grpc_client: Any) -> None:
    texts = np.array([b"hello", "żółw".encode()], dtype=object)
    for module, client in ((triton_http, http_client), (triton_grpc, grpc_client)):
        result = client.infer(
            "decorate", [tensor(module, "text", texts, "BYTES")], parameters={"suffix": "!"}
        )
        assert list(result.as_numpy("decorated")) == [b"HELLO!", "ŻÓŁW!".encode()]


def test_a_required_side_packet_must_come_with_the_request(grpc_client: Any) -> None:
    texts = np.array([b"x"], dtype=object)
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("decorate", [tensor(triton_grpc, "text", texts, "BYTES")])
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert caught.value.message() == (
        "Graph decorate needs side packet suffix; pass it as a request parameter"
    )


def test_request_parameters_cannot_replace_a_side_packet_the_graph_makes(
    grpc_client: Any,
) -> None:
    """`classifier` is the session side packet a node of the pipeline graph produces."""
    values = np.ones((1, 4), np.float32)
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer(
            "pipeline", [tensor(triton_grpc, "values", values)], parameters={"classifier": "x"}
        )
    assert caught.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "Request parameter classifier names a side packet" in caught.value.message()


def test_a_unary_timestamp_the_graph_refuses_is_a_client_error(http_client: Any) -> None:
    texts = np.array([b"x"], dtype=object)
    with pytest.raises(InferenceServerException) as caught:
        http_client.infer(
            "decorate",
            [tensor(triton_http, "text", texts, "BYTES")],
            parameters={"suffix": "!", "OVMS_MP_TIMESTAMP": 2**63 - 1},
        )
    assert caught.value.status() == "400"
    assert "timestamp" in caught.value.message().lower()


def test_calculator_failure_names_node_and_phase(
    grpc_client: Any, kserve_server: KServeServer
) -> None:
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("explode", [tensor(triton_grpc, "value", np.array([-1], np.int32))])
    assert caught.value.status() == "StatusCode.INTERNAL"
    assert 'Calculator::Process() for node "checker" failed' in caught.value.message()
    assert "negative values are not allowed here" in caught.value.message()
    response = httpx.post(
        f"http://{kserve_server.rest_url}/v2/models/explode/infer",
        json={"inputs": [{"name": "value", "datatype": "INT32", "shape": [1], "data": [-3]}]},
    )
    assert response.status_code == 500
    assert 'for node "checker" failed' in response.json()["error"]
    # The graph, and the server, go on serving.
    ok = grpc_client.infer("explode", [tensor(triton_grpc, "value", np.array([4], np.int32))])
    assert ok.as_numpy("same").tolist() == [4]


def test_a_calculator_can_take_the_request_and_build_the_response(http_client: Any) -> None:
    """REQUEST/RESPONSE streams (OVMS's KFS_REQUEST/KFS_RESPONSE): whole messages, any inputs."""
    inputs = [
        tensor(triton_http, "a", np.array([1, 2, 3], np.int32)),
        tensor(triton_http, "b", np.array([[0.5, 0.25]], np.float32)),
    ]
    result = http_client.infer("summarize", inputs, request_id="q1")
    response = result.get_response()
    assert (response["model_name"], response["model_version"], response["id"]) == (
        "summarize",
        "1",
        "q1",
    )
    assert response["parameters"] == {"inputs": 2}
    assert result.as_numpy("sum_a").tolist() == 6
    assert result.as_numpy("sum_b").tolist() == 0.75


# -------------------------------------------------------------------------------- streaming


class Stream:
    """tritonclient's bidirectional ModelStreamInfer: results arrive through a callback."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        client.start_stream(callback=lambda result, error: self.results.put((result, error)))

    def send(self, model: str, value: int, **options: Any) -> None:
        self.client.async_stream_infer(
            model, [tensor(triton_grpc, "value", np.array([value], np.int64))], **options
        )

    def receive(self) -> tuple[Any, Any]:
        return self.results.get(timeout=30)

    def close(self) -> None:
        self.client.stop_stream()


@pytest.fixture
def stream(kserve_server: KServeServer) -> Iterator[Stream]:
    client = triton_grpc.InferenceServerClient(kserve_server.grpc_url)
    opened = Stream(client)
    yield opened
    opened.close()
    client.close()


def test_stream_keeps_one_graph_run_and_answers_every_output(stream: Stream) -> None:
    """RunningSum's total grows across requests: the whole stream is one graph run. Each
    request produces two output packets, each sent back as its own response."""
    totals: list[int] = []
    doubled: list[int] = []
    for value in (3, 4, 5):
        stream.send("running_sum", value, request_id=f"r{value}")
        for _ in range(2):
            result, error = stream.receive()
            assert error is None, error
            response = result.get_response()
            assert response.id == f"r{value}"
            (output,) = response.outputs
            target = totals if output.name == "total" else doubled
            target.append(int(result.as_numpy(output.name)[0]))
    assert totals == [3, 7, 12]
    assert doubled == [6, 8, 10]


def test_stream_timestamps_come_from_the_request_parameter(stream: Stream) -> None:
    timestamps = []
    for value, timestamp in ((1, 100), (2, 250)):
        stream.send("running_sum", value, parameters={"OVMS_MP_TIMESTAMP": timestamp})
        for _ in range(2):
            result, error = stream.receive()
            assert error is None, error
            timestamps.append(result.get_response().parameters["OVMS_MP_TIMESTAMP"].int64_param)
    assert timestamps == [100, 100, 250, 250]


def test_stream_refuses_a_bad_request_and_goes_on(stream: Stream) -> None:
    stream.send("running_sum", 5, parameters={"OVMS_MP_TIMESTAMP": 10})
    for _ in range(2):
        assert stream.receive()[1] is None
    stream.send("running_sum", 6, parameters={"OVMS_MP_TIMESTAMP": 10})  # not increasing
    _, error = stream.receive()
    assert error is not None
    assert "timestamp" in str(error).lower()
    stream.send("running_sum", 7, parameters={"OVMS_MP_TIMESTAMP": 11})
    totals = []
    for _ in range(2):
        result, error = stream.receive()
        assert error is None, error
        (output,) = result.get_response().outputs
        if output.name == "total":
            totals.append(int(result.as_numpy("total")[0]))
    assert totals == [12]  # 5 + 7: the refused request left no trace


def test_stream_reports_a_graph_failure(kserve_server: KServeServer) -> None:
    """A failing calculator ends the stream with its error (node and phase in the message)."""
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)

        def requests() -> Iterator[Any]:
            for value in (2, -1):
                request = pb.ModelInferRequest(model_name="explode")
                request.inputs.add(name="value", datatype="INT32", shape=[1])
                request.raw_input_contents.append(np.array([value], np.int32).tobytes())
                yield request

        replies = list(stub.ModelStreamInfer(requests()))
    assert replies[0].error_message == ""
    assert np.frombuffer(replies[0].infer_response.raw_output_contents[0], np.int32)[0] == 2
    assert 'Calculator::Process() for node "checker" failed' in replies[-1].error_message


def test_stream_to_a_plain_model_answers_each_request(
    kserve_server: KServeServer, kserve_repository: Repository
) -> None:
    x = np.random.default_rng(9).standard_normal((2, 4)).astype(np.float32)
    with grpc.insecure_channel(kserve_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)

        def requests() -> Iterator[Any]:
            for name in ("x", "wrong", "x"):
                request = pb.ModelInferRequest(model_name="linear", model_version="1")
                request.inputs.add(name=name, datatype="FP32", shape=[2, 4])
                request.raw_input_contents.append(x.tobytes())
                yield request

        replies = list(stub.ModelStreamInfer(requests()))
    assert [bool(r.error_message) for r in replies] == [False, True, False]
    assert replies[1].error_message.startswith("Unexpected input: wrong")
    expected = kserve_repository.run("linear", 1, {"x": x})["y"]
    got = np.frombuffer(replies[2].infer_response.raw_output_contents[0], np.float32)
    np.testing.assert_allclose(got.reshape(2, 3), expected, rtol=1e-5)


def test_kserve_requests_are_counted_in_metrics(kserve_server: KServeServer) -> None:
    text = httpx.get(f"http://{kserve_server.rest_url}/metrics").text
    assert 'ovms_requests_success{api="KServe",interface="gRPC",method="ModelInfer",' in text
    assert 'ovms_requests_fail{api="KServe",interface="gRPC",method="ModelInfer",' in text
    assert 'method="ModelStreamInfer",name="running_sum"' in text
