"""OVMS's Python nodes served over KServe, through Triton's clients, as OVMS's docs use them.

One server for the module serves the graphs in python_nodes/: OVMS's quickstart, the reference's
chain of three nodes, a generative node streamed over ModelStreamInfer, the CLIP demo's graph
around a tiny OpenVINO model built here (the expected label comes from running that model
directly on the same inputs), a script that fails to load, one whose execute raises, and one
whose finalize the unload must call.
"""

from __future__ import annotations

import importlib.util
import json
import queue
import shutil
import struct
import time
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
from tritonclient.utils import InferenceServerException, serialize_byte_tensor

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

DATA = Path(__file__).parent / "python_nodes"
GRAPHS = ["quickstart", "incrementer_chain", "loopback_upper", "broken", "echo", "finalizer"]
CLIP_GRAPH = "python_model"  # the CLIP demo's names, from its config.json
CLIP_MODEL = "clip"
LABELS = "cat,dog,wolf,tiger,man,horse,frog,tree,house,computer"
TIMESTAMP = "OVMS_MP_TIMESTAMP"


def tiny_clip_module() -> Any:
    """python_nodes/clip/tiny_clip.py, the stand-in processor the preprocess script uses."""
    spec = importlib.util.spec_from_file_location("tiny_clip", DATA / "clip" / "tiny_clip.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_tiny_clip(folder: Path) -> Path:
    """A model with the CLIP demo's inputs and output (input_ids, "958" for the attention mask,
    "86" for the pixels; "out_0" the logits per image): mean token embeddings of each text
    against a projection of each image's mean colour."""
    import openvino as ov
    import openvino.opset13 as ops

    clip = tiny_clip_module()
    rng = np.random.default_rng(7)
    embeddings = rng.standard_normal((clip.VOCAB, 16)).astype(np.float32)
    projection = rng.standard_normal((3, 16)).astype(np.float32)
    input_ids = ops.parameter([-1, -1], ov.Type.i64, name="input_ids")
    mask = ops.parameter([-1, -1], ov.Type.i64, name="958")
    pixels = ops.parameter([-1, 3, -1, -1], ov.Type.f32, name="86")
    for parameter in (input_ids, mask, pixels):
        parameter.output(0).get_tensor().set_names({parameter.get_friendly_name()})
    tokens = ops.gather(ops.constant(embeddings), input_ids, ops.constant(0))
    weights = ops.unsqueeze(ops.convert(mask, ov.Type.f32), ops.constant(2))
    text = ops.divide(
        ops.reduce_sum(ops.multiply(tokens, weights), ops.constant([1]), False),
        ops.reduce_sum(weights, ops.constant([1]), False),
    )
    colour = ops.reduce_mean(pixels, ops.constant([2, 3]), False)
    image = ops.matmul(colour, ops.constant(projection), False, False)
    logits = ops.matmul(image, text, False, True)
    logits.output(0).get_tensor().set_names({"out_0"})
    folder.mkdir(parents=True)
    path = folder / "tiny_clip.xml"
    model = ov.Model([ops.result(logits)], [input_ids, mask, pixels], "tiny_clip")
    ov.save_model(model, path, compress_to_fp16=False)
    return path


@dataclass(frozen=True)
class PythonServer:
    process: ExactServer
    root: Path
    clip_xml: Path
    rest_url: str
    grpc_url: str

    def status(self, name: str) -> dict[str, Any]:
        with httpx.Client(base_url=self.process.base_url, timeout=10) as http:
            status: dict[str, Any] = http.get("/v1/config").json()[name]["model_version_status"][0]
        return status


def write_repository(root: Path) -> Path:
    """The graphs of python_nodes/ in `root`, with the CLIP demo's config and graph changed only
    in their absolute paths; returns the tiny CLIP model's file."""
    shutil.copytree(DATA, root, dirs_exist_ok=True)
    clip = root / "clip"
    model_dir = root / "clip_model"
    for name in ("graph.pbtxt", "config.json"):
        text = (clip / name).read_text()
        text = text.replace("/workspace/", f"{clip}/").replace("/model/", f"{model_dir}/")
        (clip / name).write_text(text)
    clip_xml = save_tiny_clip(model_dir / "1")
    config = json.loads((clip / "config.json").read_text())
    config["mediapipe_config_list"] += [{"name": name} for name in GRAPHS]
    (root / "config.json").write_text(json.dumps(config, indent=2))
    return clip_xml


@pytest.fixture(scope="module")
def python_server(
    tmp_path_factory: pytest.TempPathFactory,
    launch_exact: LaunchExact,
    unused_port: Callable[[], int],
) -> Iterator[PythonServer]:
    root = tmp_path_factory.mktemp("python_nodes")
    clip_xml = write_repository(root)
    grpc_port = unused_port()
    args = [
        "--config_path",
        str(root / "config.json"),
        "--port",
        str(grpc_port),
        "--file_system_poll_wait_seconds",
        "0.2",
    ]
    with launch_exact(args, model=CLIP_GRAPH, wait_ready=False) as server:
        serving = [name for name in [*GRAPHS, CLIP_GRAPH] if name != "broken"]
        server.wait_for(
            lambda http: (
                all(http.get(f"/v2/models/{n}/ready").status_code == 200 for n in serving)
                and http.get("/v1/config").json()["broken"]["model_version_status"][0]["state"]
                == "UNAVAILABLE"
            ),
            "the Python graphs to load",
        )
        yield PythonServer(
            server, root, clip_xml, f"127.0.0.1:{server.port}", f"127.0.0.1:{grpc_port}"
        )


@pytest.fixture(scope="module")
def grpc_client(python_server: PythonServer) -> Iterator[Any]:
    client = triton_grpc.InferenceServerClient(python_server.grpc_url)
    yield client
    client.close()


@pytest.fixture(scope="module")
def http_client(python_server: PythonServer) -> Iterator[Any]:
    client = triton_http.InferenceServerClient(python_server.rest_url)
    yield client
    client.close()


def bytes_input(module: Any, name: str, data: bytes) -> Any:
    """OVMS's docs' way to send text: BYTES, shape [len], the bytes as raw content."""
    tensor = module.InferInput(name, [len(data)], "BYTES")
    tensor._raw_content = data
    return tensor


# ---------------------------------------------------------------------------------- quickstart


def test_quickstart_client_as_written(grpc_client: Any) -> None:
    data = b"Make this text uppercase."
    results = grpc_client.infer("quickstart", [bytes_input(triton_grpc, "text", data)])
    assert results.as_numpy("uppercase").tobytes().decode() == "MAKE THIS TEXT UPPERCASE."
    output = results.get_response().outputs[0]
    assert (output.datatype, list(output.shape)) == ("UINT8", [len(data)])


def test_quickstart_over_rest_and_with_a_timestamp(http_client: Any, grpc_client: Any) -> None:
    """REST sends BYTES elements length-prefixed (OVMS: "every input is preceded by four bytes
    of its size"), binary or JSON; a request's OVMS_MP_TIMESTAMP comes back on its response."""
    text = b"shout this"
    for binary in (True, False):
        tensor = triton_http.InferInput("text", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([text], dtype=object), binary_data=binary)
        output = triton_http.InferRequestedOutput("uppercase", binary_data=binary)
        result = http_client.infer("quickstart", [tensor], outputs=[output])
        assert result.as_numpy("uppercase").tobytes() == struct.pack("<I", 10) + b"SHOUT THIS"
    result = grpc_client.infer(
        "quickstart", [bytes_input(triton_grpc, "text", b"x")], parameters={TIMESTAMP: 42}
    )
    assert result.get_response().parameters[TIMESTAMP].int64_param == 42


# --------------------------------------------------------------------------- chained nodes


@pytest.mark.parametrize("protocol", [triton_grpc, triton_http], ids=["grpc", "rest"])
def test_three_python_nodes_in_a_chain(protocol: Any, grpc_client: Any, http_client: Any) -> None:
    client = grpc_client if protocol is triton_grpc else http_client
    values = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    tensor = protocol.InferInput("first_number", [2, 3], "FP32")
    tensor.set_data_from_numpy(values)
    result = client.infer("incrementer_chain", [tensor])
    expected = values + 1 + 1 + 1  # each node adds one, in float32 as the nodes do
    np.testing.assert_array_equal(result.as_numpy("last_number"), expected)


# ------------------------------------------------------------------------------ generative


class Stream:
    """A ModelStreamInfer call through Triton's gRPC client."""

    def __init__(self, url: str) -> None:
        self.client = triton_grpc.InferenceServerClient(url)
        self.results: queue.Queue[tuple[Any, Any]] = queue.Queue()
        self.client.start_stream(callback=lambda result, error: self.results.put((result, error)))

    def send(self, model: str, tensor: Any, **options: Any) -> None:
        self.client.async_stream_infer(model, [tensor], **options)

    def receive(self, timeout: float = 30) -> tuple[Any, Any]:
        return self.results.get(timeout=timeout)

    def close(self) -> None:
        self.client.stop_stream()
        self.client.close()


@pytest.fixture
def stream(python_server: PythonServer) -> Iterator[Stream]:
    opened = Stream(python_server.grpc_url)
    yield opened
    opened.close()


def test_a_generative_node_streams_every_step(stream: Stream) -> None:
    """OVMS's rule: outputs start at the request's timestamp and rise by one per generation."""
    text = "lorem ipsum"
    stream.send(
        "loopback_upper",
        bytes_input(triton_grpc, "text", text.encode()),
        parameters={TIMESTAMP: 1000},
    )
    steps = []
    for _ in text:
        result, error = stream.receive()
        assert error is None, error
        response = result.get_response()
        steps.append(
            (
                result.as_numpy("steps").tobytes().decode(),
                response.parameters[TIMESTAMP].int64_param,
            )
        )
    expected = [text[:i] + text[i].upper() + text[i + 1 :] for i in range(len(text))]
    assert steps == [(step, 1000 + i) for i, step in enumerate(expected)]
    with pytest.raises(queue.Empty):
        stream.receive(timeout=0.5)  # the cycle ended with the generator
    # Another generation on the same graph run needs a later timestamp than the last output's.
    stream.send(
        "loopback_upper", bytes_input(triton_grpc, "text", b"ab"), parameters={TIMESTAMP: 2000}
    )
    assert [stream.receive()[0].as_numpy("steps").tobytes() for _ in range(2)] == [b"Ab", b"aB"]


def test_a_unary_request_to_a_generative_graph_gets_its_first_step(grpc_client: Any) -> None:
    result = grpc_client.infer("loopback_upper", [bytes_input(triton_grpc, "text", b"abc")])
    assert result.as_numpy("steps").tobytes() == b"Abc"


# ------------------------------------------------------------------------------ CLIP demo


def expected_label(clip_xml: Path, image: bytes, labels: str) -> str:
    """The demo's answer computed here: the stand-in processor, the model run directly with
    openvino, argmax."""
    import io

    import openvino as ov
    from PIL import Image

    clip = tiny_clip_module()
    inputs = clip.TinyClipProcessor()(
        text=[f"This is a photo of a {label}" for label in labels.split(",")],
        images=[Image.open(io.BytesIO(image))],
    )
    compiled = ov.Core().compile_model(str(clip_xml), "CPU")
    logits = compiled(
        {
            "input_ids": inputs["input_ids"],
            "958": inputs["attention_mask"],
            "86": inputs["pixel_values"],
        }
    )["out_0"]
    return labels.split(",")[int(np.argmax(logits[0]))]


def sample_image(seed: int) -> bytes:
    import io

    from PIL import Image

    pixels = np.random.default_rng(seed).integers(0, 256, (24, 32, 3), dtype=np.uint8)
    encoded = io.BytesIO()
    Image.fromarray(pixels).save(encoded, format="PNG")
    return encoded.getvalue()


def test_clip_demo_graph_with_its_grpc_client(
    grpc_client: Any, python_server: PythonServer
) -> None:
    """The demo's grpc_client.py: serialized BYTES as raw content, shape [length]."""
    answers = set()
    for seed, labels in ((1, LABELS), (2, LABELS), (3, "sky,sea,sand")):
        image = sample_image(seed)
        image_bytes = serialize_byte_tensor(np.array(image, dtype=np.object_)).item()
        labels_bytes = serialize_byte_tensor(np.array(labels, dtype=np.object_)).item()
        inputs = [
            bytes_input(triton_grpc, "image", image_bytes),
            bytes_input(triton_grpc, "input_labels", labels_bytes),
        ]
        results = grpc_client.infer(CLIP_GRAPH, inputs)
        answer = results.as_numpy("output_label").tobytes().decode()
        assert answer == expected_label(python_server.clip_xml, image, labels)
        answers.add(answer)
    assert len(answers) > 1  # the answer depends on the inputs


def test_clip_demo_graph_with_its_rest_client(
    http_client: Any, python_server: PythonServer
) -> None:
    """The demo's rest_client.py: BYTES of shape [1] as binary data."""
    image = sample_image(4)
    inputs = [
        triton_http.InferInput("image", [1], "BYTES"),
        triton_http.InferInput("input_labels", [1], "BYTES"),
    ]
    inputs[0].set_data_from_numpy(np.array([image], dtype=np.object_), binary_data=True)
    inputs[1].set_data_from_numpy(np.array([LABELS], dtype=np.object_), binary_data=True)
    results = http_client.infer(model_name=CLIP_GRAPH, inputs=inputs)
    answer = results.as_numpy("output_label").tobytes().decode()
    assert answer == expected_label(python_server.clip_xml, image, LABELS)


# -------------------------------------------------------------------------------- failures


def test_a_script_that_fails_to_load_leaves_only_its_graph_unavailable(
    python_server: PythonServer, grpc_client: Any
) -> None:
    status = python_server.status("broken")
    script = python_server.root / "broken" / "model.py"
    assert status["state"] == "UNAVAILABLE"
    message = status["status"]["error_message"]
    assert message.startswith(f'Python node "pythonNode" ({script}) failed to load:')
    assert f'File "{script}", line 2, in <module>' in message
    assert "ModuleNotFoundError: No module named 'a_module_that_is_not_installed'" in message
    assert not grpc_client.is_model_ready("broken")
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("broken", [bytes_input(triton_grpc, "text", b"x")])
    assert caught.value.status() == "StatusCode.UNAVAILABLE"
    assert "ModuleNotFoundError" in caught.value.message()
    response = httpx.post(
        f"http://{python_server.rest_url}/v2/models/broken/infer",
        json={"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x"]}]},
    )
    assert response.status_code == 503 and "failed to load" in response.json()["error"]
    ok = grpc_client.infer("quickstart", [bytes_input(triton_grpc, "text", b"still serving")])
    assert ok.as_numpy("uppercase").tobytes() == b"STILL SERVING"


def test_a_fixed_script_loads_on_reload(python_server: PythonServer, grpc_client: Any) -> None:
    """Scripts beside the graph count as part of it: a reload picks up an edited one (and one
    that breaks again leaves the working version serving)."""
    script = python_server.root / "broken" / "model.py"
    broken = script.read_text()
    config_path = python_server.root / "config.json"
    config = config_path.read_text()
    reload_url = f"{python_server.process.base_url}/v1/config/reload"
    try:
        shutil.copy(python_server.root / "quickstart" / "model.py", script)
        assert httpx.post(reload_url, timeout=30).status_code == 201  # OVMS's "reloaded"
        assert python_server.status("broken")["state"] == "AVAILABLE"
        result = grpc_client.infer("broken", [bytes_input(triton_grpc, "text", b"fixed")])
        assert result.as_numpy("uppercase").tobytes() == b"FIXED"
        script.write_text(broken)
        httpx.post(reload_url, timeout=30)
        assert python_server.status("broken")["state"] == "AVAILABLE"
    finally:  # back to a broken graph for the other tests: unload it, load it anew
        script.write_text(broken)
        without = json.loads(config)
        without["mediapipe_config_list"].remove({"name": "broken"})
        config_path.write_text(json.dumps(without))
        httpx.post(reload_url, timeout=30)
        config_path.write_text(config)
        httpx.post(reload_url, timeout=30)
    assert python_server.status("broken")["state"] == "UNAVAILABLE"


def test_an_execute_that_raises_fails_only_its_request(
    python_server: PythonServer, grpc_client: Any, stream: Stream
) -> None:
    script = python_server.root / "echo" / "echo.py"
    expected = (
        f'Python node "echo" ({script}): execute raised ValueError: the input said boom '
        "(echo.py, line 9, in execute)"
    )
    with pytest.raises(InferenceServerException) as caught:
        grpc_client.infer("echo", [bytes_input(triton_grpc, "payload", b"boom")])
    assert caught.value.status() == "StatusCode.INTERNAL"
    assert caught.value.message().startswith(expected)
    response = httpx.post(
        f"http://{python_server.rest_url}/v2/models/echo/infer",
        json={
            "inputs": [
                {"name": "payload", "datatype": "UINT8", "shape": [4], "data": list(b"boom")}
            ]
        },
    )
    assert response.status_code == 500 and response.json()["error"].startswith(expected)
    fine = grpc_client.infer("echo", [bytes_input(triton_grpc, "payload", b"fine")])
    assert fine.get_response().raw_output_contents[0] == b"fine"
    # In a stream the graph run fails: the error is the stream's last message.
    stream.send("echo", bytes_input(triton_grpc, "payload", b"one"))
    assert stream.receive()[0].get_response().raw_output_contents[0] == b"one"
    stream.send("echo", bytes_input(triton_grpc, "payload", b"boom"))
    result, error = stream.receive()
    assert result is None and expected in str(error)


def test_custom_datatypes_and_raw_bytes_pass_through(
    python_server: PythonServer, http_client: Any
) -> None:
    with grpc.insecure_channel(python_server.grpc_url) as channel:
        stub = pb_grpc.GRPCInferenceServiceStub(channel)
        request = pb.ModelInferRequest(model_name="echo")
        request.inputs.add(name="payload", datatype="my_string", shape=[3])
        request.raw_input_contents.append(b"null0terminated0string0")
        response = stub.ModelInfer(request)
    output = response.outputs[0]
    assert (output.name, output.datatype, list(output.shape)) == ("echoed", "my_string", [3])
    assert response.raw_output_contents[0] == b"null0terminated0string0"
    tensor = triton_http.InferInput("payload", [2], "BYTES")
    tensor.set_data_from_numpy(np.array([b"a", b"bc"], dtype=object), binary_data=True)
    result = http_client.infer("echo", [tensor])  # BYTES out: JSON strings, as OVMS sends them
    assert result.as_numpy("echoed").tolist() == [b"a", b"bc"]
    body = {
        "inputs": [
            {
                "name": "payload",
                "datatype": "odd",
                "shape": [2],
                "parameters": {"binary_data_size": 2},
            }
        ]
    }
    header = json.dumps(body).encode()
    answer = httpx.post(
        f"http://{python_server.rest_url}/v2/models/echo/infer",
        content=header + b"xy",
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert answer.status_code == 400
    assert "has no JSON form; request it as binary data" in answer.json()["error"]


def test_finalize_runs_when_the_graph_is_unloaded(python_server: PythonServer) -> None:
    config_path = python_server.root / "config.json"
    original = config_path.read_text()
    config = json.loads(original)
    config["mediapipe_config_list"] = [
        entry for entry in config["mediapipe_config_list"] if entry["name"] != "finalizer"
    ]
    marker = python_server.root / "finalizer" / "finalized.txt"
    try:
        config_path.write_text(json.dumps(config))
        deadline = time.monotonic() + 30
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.read_text() == "finalizing_node"
    finally:
        config_path.write_text(original)
        python_server.process.wait_for(
            lambda http: http.get("/v2/models/finalizer/ready").status_code == 200,
            "the finalizer graph to come back",
        )
