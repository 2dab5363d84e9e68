"""A model repository built here with openvino's Python API, and one server with REST and gRPC.

Nothing is downloaded: every model is a small graph of OpenVINO ops saved as IR. The repository
has plain models (an `echo` model with one input per KServe datatype, a `linear` model in two
versions, a `growing` model whose versions the tests add and remove), and graphs of the user
calculators in user_code/ around them. Expected outputs come from running the same IR files with
openvino directly in the test process.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

USER_CODE = Path(__file__).parent / "user_code"
FEATURES = 4

# KServe datatype -> numpy dtype, for every datatype a plain model can take.
DTYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}


def _named(output: Any, name: str) -> Any:
    output.get_tensor().set_names({name})
    return output


def save_echo_model(path: Path) -> None:
    """One input `in_<TYPE>` [-1, 2] per datatype, returned unchanged as `out_<TYPE>`."""
    import openvino as ov
    import openvino.opset13 as ops

    params, results = [], []
    for name, dtype in DTYPES.items():
        param = ops.parameter([-1, 2], ov.Type(dtype), name=f"in_{name}")
        _named(param.output(0), f"in_{name}")
        same = ops.convert(param, ov.Type(dtype))
        _named(same.output(0), f"out_{name}")
        params.append(param)
        results.append(ops.result(same))
    ov.save_model(ov.Model(results, params, "echo"), path / "model.xml")


def save_linear_model(path: Path, seed: int, outputs: int = 3) -> None:
    """y = x @ W + b with x [-1, FEATURES] FP32; W and b are random from `seed`."""
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(seed)
    weights = rng.standard_normal((FEATURES, outputs)).astype(np.float32)
    bias = rng.standard_normal(outputs).astype(np.float32)
    x = ops.parameter([-1, FEATURES], ov.Type.f32, name="x")
    _named(x.output(0), "x")
    y = ops.add(ops.matmul(x, ops.constant(weights), False, False), ops.constant(bias))
    _named(y.output(0), "y")
    ov.save_model(
        ov.Model([ops.result(y)], [x], "linear"), path / "model.xml", compress_to_fp16=False
    )


def run_directly(model_xml: Path, inputs: dict[str, Any]) -> dict[str, Any]:
    """The engine alone: compile the IR with openvino and infer (the expected outputs)."""
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_xml), "CPU")
    results = compiled.create_infer_request().infer(inputs)
    return {port.get_any_name(): value for port, value in results.items()}


PIPELINE_GRAPH = """
# values -> standardize (user code) -> classifier (OpenVINO) -> scores, argmax (user code) -> label
input_stream: "values"
output_stream: "scores"
output_stream: "label"
node {
  calculator: "kserve_test_calcs:Standardize"
  input_stream: "values"
  output_stream: "standardized"
}
node {
  calculator: "OpenVINOModelServerSessionCalculator"
  output_side_packet: "SESSION:classifier"
  node_options: {
    [type.googleapis.com / mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {
      servable_name: "classifier"
      servable_version: "1"
    }
  }
}
node {
  name: "inference"
  calculator: "OpenVINOInferenceCalculator"
  input_side_packet: "SESSION:classifier"
  input_stream: "OVTENSOR_X:standardized"
  output_stream: "OVTENSOR_Y:scores"
  node_options: {
    [type.googleapis.com / mediapipe.OpenVINOInferenceCalculatorOptions]: {
      tag_to_input_tensor_names { key: "OVTENSOR_X" value: "x" }
      tag_to_output_tensor_names { key: "OVTENSOR_Y" value: "y" }
    }
  }
}
node {
  calculator: "ArgmaxCalculator"
  input_stream: "SCORES:scores"
  output_stream: "LABEL:label"
}
"""

RUNNING_SUM_GRAPH = """
input_stream: "value"
output_stream: "total"
output_stream: "doubled"
node {
  calculator: "kserve_test_calcs:RunningSum"
  input_stream: "value"
  output_stream: "TOTAL:total"
  output_stream: "DOUBLED:doubled"
}
"""

DECORATE_GRAPH = """
input_stream: "text"
output_stream: "decorated"
node {
  calculator: "kserve_test_calcs:Decorate"
  input_stream: "text"
  input_side_packet: "SUFFIX:suffix"
  output_stream: "decorated"
}
"""

EXPLODE_GRAPH = """
input_stream: "value"
output_stream: "same"
node {
  name: "checker"
  calculator: "kserve_test_calcs:Explode"
  input_stream: "value"
  output_stream: "same"
}
"""

SUMMARIZE_GRAPH = """
input_stream: "REQUEST:request"
output_stream: "RESPONSE:response"
node {
  calculator: "kserve_test_calcs:Summarize"
  input_stream: "REQUEST:request"
  output_stream: "RESPONSE:response"
}
"""

BUGGY_HTTP_GRAPH = """
# An OpenAI-route graph whose calculator raises a plain RuntimeError (tests of 500s)
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node {
  name: "buggy"
  calculator: "kserve_test_calcs:FailOnRequest"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
}
"""


@dataclass(frozen=True)
class Repository:
    """The repository on disk, and the tools tests use to check answers against it."""

    root: Path
    dtypes = DTYPES

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    def model_xml(self, name: str, version: int) -> Path:
        return self.root / name / str(version) / "model.xml"

    def run(self, name: str, version: int, inputs: dict[str, Any]) -> dict[str, Any]:
        """The model version run directly with openvino."""
        return run_directly(self.model_xml(name, version), inputs)

    @staticmethod
    def save_linear_model(path: Path, seed: int) -> None:
        save_linear_model(path, seed)


def write_repository(root: Path) -> Repository:
    save_echo_model(root / "echo" / "1")
    save_linear_model(root / "linear" / "1", seed=1)
    save_linear_model(root / "linear" / "2", seed=2)
    save_linear_model(root / "growing" / "1", seed=10)
    save_linear_model(root / "pipeline" / "classifier" / "1", seed=3)
    graphs = {
        "pipeline": PIPELINE_GRAPH,
        "running_sum": RUNNING_SUM_GRAPH,
        "decorate": DECORATE_GRAPH,
        "explode": EXPLODE_GRAPH,
        "summarize": SUMMARIZE_GRAPH,
        "buggy_http": BUGGY_HTTP_GRAPH,
    }
    for name, text in graphs.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        (root / name / "graph.pbtxt").write_text(text)
    # The pipeline's own model comes from its subconfig.json (found by default, as in OVMS).
    subconfig = {
        "model_config_list": [{"config": {"name": "classifier", "base_path": "classifier"}}]
    }
    (root / "pipeline" / "subconfig.json").write_text(json.dumps(subconfig))
    config = {
        "model_config_list": [
            {"config": {"name": "echo", "base_path": "echo", "nireq": 4}},
            {
                "config": {
                    "name": "linear",
                    "base_path": "linear",
                    "nireq": 2,
                    "model_version_policy": {"all": {}},
                }
            },
            {"config": {"name": "growing", "base_path": "growing"}},
        ],
        "mediapipe_config_list": [{"name": name} for name in graphs],
    }
    (root / "config.json").write_text(json.dumps(config, indent=2))
    return Repository(root)


@pytest.fixture(scope="session")
def kserve_repository(tmp_path_factory: pytest.TempPathFactory) -> Repository:
    return write_repository(tmp_path_factory.mktemp("kserve_models"))


@dataclass(frozen=True)
class KServeServer:
    process: ExactServer
    rest_url: str  # host:port, as tritonclient.http wants it
    grpc_url: str


@pytest.fixture(scope="session")
def kserve_server(
    kserve_repository: Repository, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> Iterator[KServeServer]:
    """One server for the KServe tests: REST and gRPC, config polled every 0.2 s."""
    grpc_port = unused_port()
    args = [
        "--config_path",
        str(kserve_repository.config),
        "--port",
        str(grpc_port),
        "--file_system_poll_wait_seconds",
        "0.2",
        "--python_path",
        str(USER_CODE),
        "--import",
        "kserve_test_calcs",
        "--metrics_enable",
    ]
    with launch_exact(args, model="echo") as server:
        yield KServeServer(server, f"127.0.0.1:{server.port}", f"127.0.0.1:{grpc_port}")


@pytest.fixture(scope="session")
def grpc_client(kserve_server: KServeServer) -> Any:
    """Triton's KServe gRPC client on the server."""
    import tritonclient.grpc

    return tritonclient.grpc.InferenceServerClient(kserve_server.grpc_url)


@pytest.fixture(scope="session")
def http_client(kserve_server: KServeServer) -> Any:
    """Triton's KServe REST client on the server."""
    import tritonclient.http

    return tritonclient.http.InferenceServerClient(kserve_server.rest_url)


@pytest.fixture
def growing_versions(kserve_repository: Repository) -> Iterator[Path]:
    """The `growing` model's folder; versions a test adds are removed afterwards."""
    base = kserve_repository.root / "growing"
    yield base
    for version in base.iterdir():
        if version.name != "1":
            shutil.rmtree(version)
