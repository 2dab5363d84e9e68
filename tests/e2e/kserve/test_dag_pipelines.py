"""OVMS's DAG pipelines end to end: a config.json with models and `pipeline_config_list`.

The repository's models are tiny IRs built here with openvino's opset; the pipelines chain
them, demultiply one model's outputs into branches that another model runs, gather branches
before a model and before the response, and demultiply the request itself (OVMS's "dynamic
batch" pipeline). Every answer is compared with the same models run directly with OpenVINO in
the test process, through Triton's clients over gRPC and REST. A pipeline with a custom node
is refused with its node's name while the others serve; /metrics (switched on by config.json's
`monitoring` section) follows OVMS's per-version series; a model version that no longer fits a
pipeline makes it unavailable until the version goes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
import httpx
import numpy as np
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

FEATURES, CLASSES, BRANCHES = 4, 3, 3
PIPELINES = ("chain", "branches", "vote", "any_batch")
Client = Any  # a tritonclient.grpc or tritonclient.http InferenceServerClient


def _named(output: Any, name: str) -> Any:
    output.get_tensor().set_names({name})
    return output


def _save(model: Any, directory: Path) -> None:
    import openvino as ov

    directory.mkdir(parents=True, exist_ok=True)
    ov.save_model(model, directory / "model.xml", compress_to_fp16=False)


def save_models(root: Path) -> None:
    """linear: x [-1, 4] -> y [-1, 3]; rescale: z [-1, 3] -> w = z / 2 + 1; expand: x [1, 4]
    -> copies [3, 1, 4] (x, 2x, 3x); combine: parts [3, 1, 3] -> total, their sum."""
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(7)
    x = _named(ops.parameter([-1, FEATURES], ov.Type.f32, name="x").output(0), "x")
    weights = rng.standard_normal((FEATURES, CLASSES)).astype(np.float32)
    y = ops.add(ops.matmul(x, ops.constant(weights), False, False), ops.constant(np.float32(0.5)))
    _save(
        ov.Model([ops.result(_named(y.output(0), "y"))], [x.get_node()], "linear"),
        root / "linear" / "1",
    )

    z = _named(ops.parameter([-1, CLASSES], ov.Type.f32, name="z").output(0), "z")
    w = ops.add(ops.multiply(z, ops.constant(np.float32(0.5))), ops.constant(np.float32(1)))
    _save(
        ov.Model([ops.result(_named(w.output(0), "w"))], [z.get_node()], "rescale"),
        root / "rescale" / "1",
    )

    x = _named(ops.parameter([1, FEATURES], ov.Type.f32, name="x").output(0), "x")
    axis = ops.constant(np.int64(0))
    copies = ops.concat(
        [ops.unsqueeze(ops.multiply(x, ops.constant(np.float32(i + 1))), axis) for i in range(3)], 0
    )
    _save(
        ov.Model([ops.result(_named(copies.output(0), "copies"))], [x.get_node()], "expand"),
        root / "expand" / "1",
    )

    parts = _named(
        ops.parameter([BRANCHES, 1, CLASSES], ov.Type.f32, name="parts").output(0), "parts"
    )
    total = ops.reduce_sum(parts, axis, False)
    _save(
        ov.Model([ops.result(_named(total.output(0), "total"))], [parts.get_node()], "combine"),
        root / "combine" / "1",
    )


def source(node: str, item: str) -> dict[str, str]:
    return {"node_name": node, "data_item": item}


def dl_node(
    name: str, model: str, inputs: dict[str, dict[str, str]], outputs: dict[str, str], **extra: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "model_name": model,
        "type": "DL model",
        "inputs": [{key: value} for key, value in inputs.items()],
        "outputs": [{"data_item": item, "alias": alias} for alias, item in outputs.items()],
        **extra,
    }


SPLIT = dl_node(
    "split",
    "expand",
    {"x": source("request", "x")},
    {"copies": "copies"},
    demultiply_count=BRANCHES,
)
SCORE = dl_node("score", "linear", {"x": source("split", "copies")}, {"scores": "y"})
CONFIG: dict[str, Any] = {
    "model_config_list": [
        {"config": {"name": name, "base_path": name, "nireq": 2}}
        for name in ("linear", "rescale", "expand", "combine")
    ],
    "pipeline_config_list": [
        {
            "name": "chain",
            "inputs": ["x"],
            "nodes": [
                dl_node("first", "linear", {"x": source("request", "x")}, {"scores": "y"}),
                dl_node("second", "rescale", {"z": source("first", "scores")}, {"rescaled": "w"}),
            ],
            "outputs": [
                {"final": source("second", "rescaled")},
                {"Intermediate Scores": source("first", "scores")},
            ],
        },
        {
            "name": "branches",
            "inputs": ["x"],
            "nodes": [SPLIT, SCORE],
            "outputs": [{"scores": source("score", "scores")}],
        },
        {
            "name": "vote",
            "inputs": ["x"],
            "nodes": [
                SPLIT,
                SCORE,
                dl_node(
                    "sum",
                    "combine",
                    {"parts": source("score", "scores")},
                    {"total": "total"},
                    gather_from_node="split",
                ),
            ],
            "outputs": [{"total": source("sum", "total")}],
        },
        {
            "name": "any_batch",
            "inputs": ["x"],
            "demultiply_count": -1,
            "nodes": [dl_node("score", "linear", {"x": source("request", "x")}, {"scores": "y"})],
            "outputs": [{"scores": source("score", "scores")}],
        },
        {
            "name": "custom",
            "inputs": ["x"],
            "nodes": [
                {
                    "name": "crop",
                    "type": "custom",
                    "library_name": "image_crop",
                    "inputs": [{"image": source("request", "x")}],
                    "outputs": [{"data_item": "crops", "alias": "crops"}],
                }
            ],
            "outputs": [{"crops": source("crop", "crops")}],
        },
    ],
    "custom_node_library_config_list": [
        {"name": "image_crop", "base_path": "/ovms/lib/libcustom_node_image_crop.so"}
    ],
    "monitoring": {
        "metrics": {
            "enable": True,
            "metrics_list": [
                "ovms_requests_success",
                "ovms_requests_fail",
                "ovms_request_time_us",
                "ovms_current_requests",
                "ovms_inference_time_us",
                "ovms_wait_for_infer_req_time_us",
                "ovms_streams",
                "ovms_infer_req_queue_size",
                "ovms_infer_req_active",
            ],
        }
    },
}


class Direct:
    """The repository's models run with OpenVINO in the test process (the expected answers)."""

    def __init__(self, root: Path) -> None:
        import openvino as ov

        core = ov.Core()
        self.models = {
            name: core.compile_model(str(root / name / "1" / "model.xml"), "CPU")
            for name in ("linear", "rescale", "expand", "combine")
        }

    def __call__(self, name: str, value: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        result: np.ndarray[Any, Any] = self.models[name](value)[0]
        return result

    def branches(self, x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        copies = self("expand", x)
        return np.stack([self("linear", copies[i]) for i in range(BRANCHES)])


@dataclass(frozen=True)
class DagServer:
    server: ExactServer
    root: Path
    grpc_url: str
    direct: Direct

    @property
    def rest_url(self) -> str:
        return f"127.0.0.1:{self.server.port}"

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.base_url, timeout=60.0)


def pipelines_ready(http: httpx.Client) -> bool:
    return all(http.get(f"/v2/models/{name}/ready").status_code == 200 for name in PIPELINES)


@pytest.fixture(scope="module")
def dag(
    tmp_path_factory: pytest.TempPathFactory,
    launch_exact: LaunchExact,
    unused_port: Callable[[], int],
) -> Iterator[DagServer]:
    root = tmp_path_factory.mktemp("dag_models")
    save_models(root)
    (root / "config.json").write_text(json.dumps(CONFIG, indent=2))
    grpc_port = unused_port()
    args = [
        "--config_path",
        str(root / "config.json"),
        "--port",
        str(grpc_port),
        "--file_system_poll_wait_seconds",
        "0.2",
    ]
    # The custom node's pipeline never loads, so the server is never ready as a whole.
    with launch_exact(args, model="chain", wait_ready=False) as server:
        server.wait_for(pipelines_ready, "the pipelines")
        yield DagServer(server, root, f"127.0.0.1:{grpc_port}", Direct(root))


@pytest.fixture(params=["grpc", "http"])
def client(request: pytest.FixtureRequest, dag: DagServer) -> Iterator[Client]:
    if request.param == "grpc":
        yield triton_grpc.InferenceServerClient(dag.grpc_url)
    else:
        yield triton_http.InferenceServerClient(dag.rest_url)


def infer(
    client: Client,
    model: str,
    x: np.ndarray[Any, Any],
    outputs: list[str] | None = None,
    version: str = "",
) -> Any:
    module = triton_grpc if isinstance(client, triton_grpc.InferenceServerClient) else triton_http
    tensor = module.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x)
    asked = [module.InferRequestedOutput(name) for name in outputs] if outputs else None
    return client.infer(model, [tensor], outputs=asked, model_version=version)


def features(*shape: int, seed: int = 0) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ------------------------------------------------------------------------------- answers


def test_chain_runs_each_model_once_with_outputs_by_pipeline_names(
    client: Client, dag: DagServer
) -> None:
    x = features(2, FEATURES)
    result = infer(client, "chain", x)
    scores = dag.direct("linear", x)
    np.testing.assert_allclose(result.as_numpy("Intermediate Scores"), scores, rtol=1e-5)
    np.testing.assert_allclose(result.as_numpy("final"), dag.direct("rescale", scores), rtol=1e-5)
    response = result.get_response()
    name, version = (
        (response.model_name, response.model_version)
        if isinstance(client, triton_grpc.InferenceServerClient)
        else (response["model_name"], response["model_version"])
    )
    assert (name, version) == ("chain", "1")


def test_only_the_outputs_asked_for_are_returned(client: Client, dag: DagServer) -> None:
    x = features(1, FEATURES, seed=1)
    result = infer(client, "chain", x, outputs=["final"])
    assert result.as_numpy("Intermediate Scores") is None
    expected = dag.direct("rescale", dag.direct("linear", x))
    np.testing.assert_allclose(result.as_numpy("final"), expected, rtol=1e-5)


def test_demultiplied_branches_are_gathered_by_the_response(client: Client, dag: DagServer) -> None:
    x = features(1, FEATURES, seed=2)
    scores = infer(client, "branches", x).as_numpy("scores")
    assert scores.shape == (BRANCHES, 1, CLASSES)
    np.testing.assert_allclose(scores, dag.direct.branches(x), rtol=1e-5)


def test_gather_from_node_stacks_the_branches_for_the_next_model(
    client: Client, dag: DagServer
) -> None:
    x = features(1, FEATURES, seed=3)
    total = infer(client, "vote", x).as_numpy("total")
    np.testing.assert_allclose(total, dag.direct("combine", dag.direct.branches(x)), rtol=1e-5)


@pytest.mark.parametrize("batch", [1, 5])
def test_request_demultiplexing_serves_any_batch_with_a_batch_one_model(
    client: Client, dag: DagServer, batch: int
) -> None:
    x = features(batch, 1, FEATURES, seed=batch)
    scores = infer(client, "any_batch", x).as_numpy("scores")
    expected = np.stack([dag.direct("linear", x[i]) for i in range(batch)])
    np.testing.assert_allclose(scores, expected, rtol=1e-5)


def test_the_version_a_request_names_is_ignored_as_in_ovms(client: Client, dag: DagServer) -> None:
    x = features(1, FEATURES, seed=4)
    result = infer(client, "vote", x, version="7")
    np.testing.assert_allclose(
        result.as_numpy("total"), dag.direct("combine", dag.direct.branches(x)), rtol=1e-5
    )


def test_a_stream_of_requests_to_a_pipeline_is_answered_one_by_one(dag: DagServer) -> None:
    inputs = [features(1, FEATURES, seed=10 + i) for i in range(3)]

    def requests() -> Iterator[pb.ModelInferRequest]:
        for x in inputs:
            request = pb.ModelInferRequest(model_name="branches")
            request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
            request.raw_input_contents.append(x.tobytes())
            yield request

    with grpc.insecure_channel(dag.grpc_url) as channel:
        replies = list(pb_grpc.GRPCInferenceServiceStub(channel).ModelStreamInfer(requests()))
    assert [r.error_message for r in replies] == ["", "", ""]
    for reply, x in zip(replies, inputs, strict=True):
        got = np.frombuffer(reply.infer_response.raw_output_contents[0], np.float32)
        np.testing.assert_allclose(
            got.reshape(BRANCHES, 1, CLASSES), dag.direct.branches(x), rtol=1e-5
        )


# ------------------------------------------------------------------- metadata and refusals


def test_metadata_shows_the_pipeline_inputs_and_outputs(dag: DagServer) -> None:
    client = triton_grpc.InferenceServerClient(dag.grpc_url)
    described = {
        name: client.get_model_metadata(name) for name in ("chain", "branches", "any_batch")
    }
    tensors = {
        name: (
            [(t.name, t.datatype, list(t.shape)) for t in found.inputs],
            [(t.name, t.datatype, list(t.shape)) for t in found.outputs],
        )
        for name, found in described.items()
    }
    assert tensors == {
        "chain": (
            [("x", "FP32", [-1, FEATURES])],
            [("final", "FP32", [-1, CLASSES]), ("Intermediate Scores", "FP32", [-1, CLASSES])],
        ),
        "branches": ([("x", "FP32", [1, FEATURES])], [("scores", "FP32", [BRANCHES, -1, CLASSES])]),
        "any_batch": ([("x", "FP32", [-1, -1, FEATURES])], [("scores", "FP32", [-1, -1, CLASSES])]),
    }
    assert [list(found.versions) for found in described.values()] == [["1"]] * 3
    rest = httpx.get(f"http://{dag.rest_url}/v2/models/vote").json()
    assert rest["versions"] == ["1"] and rest["outputs"] == [
        {"name": "total", "datatype": "FP32", "shape": [1, CLASSES]}
    ]


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({}, "Missing input: x"),
        (
            {"x": np.zeros((1, FEATURES), np.float64)},
            "Invalid datatype of input x: got FP64, expected FP32",
        ),
        (
            {"x": np.zeros((2, FEATURES), np.float32)},
            "Invalid shape of input x: got [2, 4], expected [1, 4]",
        ),
        (
            {"x": np.zeros((1, FEATURES), np.float32), "extra": np.zeros(1, np.float32)},
            "Unexpected input: extra; pipeline vote takes x",
        ),
    ],
)
def test_bad_requests_are_refused_naming_the_input(
    dag: DagServer, inputs: dict[str, Any], message: str
) -> None:
    request = pb.ModelInferRequest(model_name="vote")
    for name, value in inputs.items():
        datatype = "FP64" if value.dtype == np.float64 else "FP32"
        request.inputs.add(name=name, datatype=datatype, shape=list(value.shape))
        request.raw_input_contents.append(value.tobytes())
    with grpc.insecure_channel(dag.grpc_url) as channel, pytest.raises(grpc.RpcError) as info:
        pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert info.value.details() == message
    if not inputs:
        return  # REST's parser refuses an empty `inputs` array before any pipeline sees it
    body = {
        "inputs": [
            {
                "name": n,
                "datatype": "FP64" if v.dtype == np.float64 else "FP32",
                "shape": list(v.shape),
                "data": v.ravel().tolist(),
            }
            for n, v in inputs.items()
        ]
    }
    reply = httpx.post(f"http://{dag.rest_url}/v2/models/vote/infer", json=body)
    assert (reply.status_code, reply.json()) == (400, {"error": message})


def test_an_output_the_pipeline_does_not_have_is_refused(client: Client) -> None:
    with pytest.raises(
        InferenceServerException,
        match="Unexpected output: nope; pipeline chain produces final, Intermediate Scores",
    ):
        infer(client, "chain", features(1, FEATURES), outputs=["nope"])


def test_a_custom_node_pipeline_is_refused_with_the_node_and_why(dag: DagServer) -> None:
    with dag.http() as http:
        status = http.get("/v1/config").json()["custom"]["model_version_status"][0]
        ready = http.get("/v2/models/custom/ready").status_code
        one = {"name": "x", "datatype": "FP32", "shape": [1], "data": [0.0]}
        infer_reply = http.post("/v2/models/custom/infer", json={"inputs": [one]})
        others = {
            name: http.get("/v1/config").json()[name]["model_version_status"][0]["state"]
            for name in PIPELINES
        }
    assert status["state"] == "UNAVAILABLE"
    reason = status["status"]["error_message"]
    assert "node 'crop' is a custom node of library 'image_crop'" in reason
    assert "/ovms/lib/libcustom_node_image_crop.so" in reason
    assert ready == 503
    assert infer_reply.status_code == 503 and "custom node" in infer_reply.json()["error"]
    assert set(others.values()) == {"AVAILABLE"}
    log = dag.server.log()
    assert "custom_node_library_config_list is not loaded" in log
    assert "servable custom failed to load: pipeline custom: node 'crop' is a custom node" in log


def test_the_pipeline_graph_is_on_the_graph_page(dag: DagServer) -> None:
    with dag.http() as http:
        page = http.get("/graphs/vote")
    assert page.status_code == 200
    for node in ("split:demultiply", "score", "sum:gather", "sum"):
        assert node in page.text


# --------------------------------------------------------------------------------- metrics


def samples(dag: DagServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with dag.http() as http:
        text = http.get("/metrics").text
    assert "ovms_requests_success{" in text  # OVMS's counters carry no _total suffix
    return {
        # The parser names a counter's samples <name>_total; OVMS's name is the family's.
        (
            family.name if family.type == "counter" else sample.name,
            tuple(sorted(sample.labels.items())),
        ): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    found: dict[tuple[str, tuple[tuple[str, str], ...]], float], family: str, **labels: str
) -> float:
    return found.get((family, tuple(sorted(labels.items()))), 0.0)


def test_metrics_count_pipelines_and_their_models_per_version(dag: DagServer) -> None:
    client = triton_grpc.InferenceServerClient(dag.grpc_url)
    infer(client, "branches", features(1, FEATURES))  # the models' first inferences are done
    before = samples(dag)
    calls = 4
    for seed in range(calls):
        infer(client, "branches", features(1, FEATURES, seed=seed))
    with pytest.raises(InferenceServerException):
        infer(client, "branches", features(2, FEATURES))
    client.get_model_metadata("branches")
    assert client.is_model_ready("branches")
    after = samples(dag)

    def grew(family: str, **labels: str) -> float:
        return value(after, family, **labels) - value(before, family, **labels)

    request = {"api": "KServe", "interface": "gRPC", "name": "branches"}
    assert grew("ovms_requests_success", method="ModelInfer", version="1", **request) == calls
    assert grew("ovms_requests_fail", method="ModelInfer", version="1", **request) == 1
    assert grew("ovms_requests_success", method="ModelMetadata", version="1", **request) == 1
    assert grew("ovms_requests_success", method="ModelReady", **request) == 1
    assert (
        grew("ovms_request_time_us_count", interface="gRPC", name="branches", version="1") == calls
    )
    # Each call ran `expand` once and `linear` once per branch: the models' own series.
    linear, expand = {"name": "linear", "version": "1"}, {"name": "expand", "version": "1"}
    assert grew("ovms_inference_time_us_count", **linear) == calls * BRANCHES
    assert grew("ovms_inference_time_us_count", **expand) == calls
    assert grew("ovms_wait_for_infer_req_time_us_count", **linear) == calls * BRANCHES
    assert value(after, "ovms_infer_req_queue_size", **linear) == 2  # nireq
    assert value(after, "ovms_streams", **linear) >= 1
    assert value(after, "ovms_infer_req_active", **linear) == 0
    assert value(after, "ovms_current_requests", **linear) == 0
    # A model's own requests are not counted when a pipeline runs it.
    assert (
        grew(
            "ovms_requests_success",
            method="ModelInfer",
            version="1",
            api="KServe",
            interface="gRPC",
            name="linear",
        )
        == 0
    )
    # Families monitoring.metrics_list leaves out are not shown.
    assert not any(name.startswith("ovms_graph_") for name, _ in after)


# ------------------------------------------------------------------------------ revalidation


def test_a_model_version_that_no_longer_fits_makes_the_pipeline_unavailable(dag: DagServer) -> None:
    """OVMS checks a pipeline again when its models change; so does graphrt."""
    import openvino as ov
    import openvino.opset13 as ops

    version = dag.root / "rescale" / "2"
    z = _named(ops.parameter([-1, CLASSES + 1], ov.Type.f32, name="z").output(0), "z")
    _save(ov.Model([ops.result(_named(ops.relu(z).output(0), "w"))], [z.get_node()], "r2"), version)

    def chain_state(http: httpx.Client) -> tuple[str, str]:
        status = http.get("/v1/config").json()["chain"]["model_version_status"][0]
        return status["state"], status["status"]["error_message"]

    try:
        dag.server.wait_for(
            lambda http: chain_state(http)[0] == "UNAVAILABLE", "chain to be refused"
        )
        with dag.http() as http:
            _, reason = chain_state(http)
        assert reason == (
            "pipeline chain: shape mismatch between node 'second' input 'z' and node 'first' "
            "output 'y': [-1, 4] vs [-1, 3]"
        )
    finally:
        shutil.rmtree(version)
    dag.server.wait_for(lambda http: chain_state(http)[0] == "AVAILABLE", "chain to be back")
    x = features(1, FEATURES, seed=20)
    result = infer(triton_grpc.InferenceServerClient(dag.grpc_url), "chain", x)
    np.testing.assert_allclose(
        result.as_numpy("final"), dag.direct("rescale", dag.direct("linear", x)), rtol=1e-5
    )
