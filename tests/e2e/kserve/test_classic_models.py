"""OVMS's classic-model command lines with `graphrt` in place of `ovms`, through Triton's clients
(gRPC and REST), grpcio stubs and plain HTTP.

- The quick start's `--model_name resnet --model_path <folder of versions> --port` with the
  parameter page's flags (layout, mean, scale, color_format, batch_size, nireq,
  model_version_policy, target_device, plugin_config) serves an NCHW image model that takes
  JPEG/PNG images as BYTES, and raw NHWC tensors.
- A config.json serves a model in every format OpenVINO's frontends read (IR, ONNX, TensorFlow
  frozen graph and SavedModel, TensorFlow Lite, PaddlePaddle; written offline by
  tools/classic_models.py), a model file given itself as version 1, and the image model with
  the entry `graphrt --add_to_config` writes from the same flags.

Expected outputs come from the model files run with openvino in this process, on inputs
preprocessed here in numpy as OVMS's docs define it (decode to BGR, resize, colour, mean, scale,
NHWC to NCHW).
"""

from __future__ import annotations

import io
import json
import shutil
import struct
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
from PIL import Image
from tritonclient.utils import InferenceServerException

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve import grpc_predict_v2_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

Array = np.ndarray[Any, Any]
MEAN = np.array([10.0, 20.0, 30.0], np.float32)
SCALE = np.array([2.0, 4.0, 8.0], np.float32)
PARAMETERS = [
    "--layout", "NHWC:NCHW",
    "--mean", "[10,20,30]",
    "--scale", "[2,4,8]",
    "--color_format", "RGB:BGR",  # images decode to BGR; the model takes RGB
    "--batch_size", "2",
    "--nireq", "2",
    "--model_version_policy", '{"all": {}}',
    "--target_device", "CPU",
    "--plugin_config", '{"NUM_STREAMS": 1}',
]  # fmt: skip
RNG = np.random.default_rng(7)
PICTURES = [
    RNG.integers(0, 256, (10, 12, 3), dtype=np.uint8),  # resized to the model's 8x8
    RNG.integers(0, 256, (8, 8, 3), dtype=np.uint8),
]


def encoded(pixels: Array, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, fmt)
    return buffer.getvalue()


IMAGES = [encoded(PICTURES[0], "PNG"), encoded(PICTURES[1], "JPEG")]


def run_directly(model_file: Path, x: Array) -> Array:
    import openvino as ov

    compiled = ov.Core().compile_model(str(model_file), "CPU")
    return np.asarray(compiled.create_infer_request().infer({0: x})[compiled.output(0)])


def preprocessed(nhwc_bgr: Array) -> Array:
    """What the served model's PrePostProcessor does, in numpy: BGR->RGB, mean, scale, NCHW."""
    rgb = nhwc_bgr[..., ::-1].astype(np.float32)
    return np.ascontiguousarray(((rgb - MEAN) / SCALE).transpose(0, 3, 1, 2))


def decoded(images: list[bytes]) -> Array:
    """The images as OVMS decodes them: BGR pixels, resized (bilinear) to 8x8."""
    pixels = []
    for data in images:
        image = Image.open(io.BytesIO(data)).convert("RGB")
        if image.size != (8, 8):
            image = image.resize((8, 8), Image.Resampling.BILINEAR)
        pixels.append(np.asarray(image)[..., ::-1])
    return np.stack(pixels)


def length_prefixed(images: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(image)) + image for image in images)


@dataclass(frozen=True)
class Models:
    root: Path
    formats: dict[str, Path]  # format -> what openvino reads (a SavedModel's folder)

    @property
    def resnet_xml(self) -> Path:
        return self.root / "resnet" / "1" / "model.xml"

    def expected(self, nhwc_bgr: Array) -> Array:
        """The model file (batch 1) run on each preprocessed image."""
        batch = preprocessed(nhwc_bgr)
        return np.concatenate([run_directly(self.resnet_xml, row[None]) for row in batch])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, classic_models: Any) -> Models:
    root = tmp_path_factory.mktemp("classic")
    classic_models.image_model(root / "resnet" / "1")
    shutil.copytree(root / "resnet" / "1", root / "resnet" / "2")
    classic_models.save_onnx(root / "file")
    formats = {}
    for name, save in classic_models.FORMATS.items():
        written = save(root / "formats" / name / "1")
        formats[name] = written.parent if written.name == "saved_model.pb" else written
    return Models(root, formats)


@dataclass(frozen=True)
class Running:
    server: ExactServer
    grpc_url: str

    @property
    def rest_url(self) -> str:
        return f"127.0.0.1:{self.server.port}"


@pytest.fixture(scope="module")
def resnet(
    models: Models, launch_exact: LaunchExact, unused_port: Callable[[], int]
) -> Iterator[Running]:
    """OVMS's quick start command line, with the parameter page's flags."""
    grpc_port = unused_port()
    folder = str(models.root / "resnet")
    args = ["--model_name", "resnet", "--model_path", folder, "--port", str(grpc_port)]
    with launch_exact([*args, *PARAMETERS], model="resnet") as server:
        yield Running(server, f"127.0.0.1:{grpc_port}")


def test_the_quick_start_serves_the_versions_with_the_layout_clients_send(
    resnet: Running,
) -> None:
    metadata = triton_grpc.InferenceServerClient(resnet.grpc_url).get_model_metadata("resnet")
    assert list(metadata.versions) == ["1", "2"]  # model_version_policy all
    (tensor,) = metadata.inputs
    assert (tensor.name, tensor.datatype, list(tensor.shape)) == ("data", "FP32", [2, 8, 8, 3])
    assert (
        "serving " in resnet.server.log() and "as the classic model resnet" in resnet.server.log()
    )


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_images_sent_as_bytes_are_decoded_resized_and_preprocessed(
    resnet: Running, models: Models, transport: str
) -> None:
    module: Any = triton_grpc if transport == "grpc" else triton_http
    client = module.InferenceServerClient(
        resnet.grpc_url if transport == "grpc" else resnet.rest_url
    )
    tensor = module.InferInput("data", [2], "BYTES")
    options = {"binary_data": True} if transport == "http" else {}
    tensor.set_data_from_numpy(np.array(IMAGES, dtype=object), **options)
    result = client.infer("resnet", [tensor], model_version="2").as_numpy("prob")
    np.testing.assert_allclose(result, models.expected(decoded(IMAGES)), rtol=1e-5, atol=1e-5)


def test_images_in_bytes_contents_through_grpcio_stubs(resnet: Running, models: Models) -> None:
    request = pb.ModelInferRequest(model_name="resnet")
    tensor = request.inputs.add(name="data", datatype="BYTES", shape=[2])
    tensor.contents.bytes_contents.extend(IMAGES)
    with grpc.insecure_channel(resnet.grpc_url) as channel:
        reply = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request)
    result = np.frombuffer(reply.raw_output_contents[0], np.float32).reshape(2, 3, 8, 8)
    np.testing.assert_allclose(result, models.expected(decoded(IMAGES)), rtol=1e-5, atol=1e-5)


def test_a_lone_bytes_input_may_leave_its_size_out_over_rest(
    resnet: Running, models: Models
) -> None:
    header = json.dumps({"inputs": [{"name": "data", "shape": [2], "datatype": "BYTES"}]}).encode()
    response = httpx.post(
        f"http://{resnet.rest_url}/v2/models/resnet/infer",
        content=header + length_prefixed(IMAGES),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status_code == 200, response.text
    (output,) = response.json()["outputs"]
    result = np.array(output["data"], np.float32).reshape(output["shape"])
    np.testing.assert_allclose(result, models.expected(decoded(IMAGES)), rtol=1e-5, atol=1e-5)


def test_raw_tensors_get_the_same_preprocessing(resnet: Running, models: Models) -> None:
    pixels = RNG.integers(0, 256, (2, 8, 8, 3)).astype(np.float32)
    client = triton_grpc.InferenceServerClient(resnet.grpc_url)
    tensor = triton_grpc.InferInput("data", [2, 8, 8, 3], "FP32")
    tensor.set_data_from_numpy(pixels)
    result = client.infer("resnet", [tensor]).as_numpy("prob")
    np.testing.assert_allclose(result, models.expected(pixels), rtol=1e-5, atol=1e-5)


GRAY = encoded(np.zeros((8, 8), np.uint8), "PNG")


@pytest.mark.parametrize(
    ("images", "message"),
    [
        ([b"not an image", IMAGES[0]], "Image parsing failed: element 0 of input data"),
        ([IMAGES[0], GRAY], "Invalid number of channels in binary input data: image 1 has 1"),
        ([IMAGES[0]], "Invalid input batch size of input data: expected 2, got 1 images"),
    ],
)
def test_bad_images_are_invalid_argument_naming_the_input(
    resnet: Running, images: list[bytes], message: str
) -> None:
    grpc_client = triton_grpc.InferenceServerClient(resnet.grpc_url)
    tensor = triton_grpc.InferInput("data", [len(images)], "BYTES")
    tensor.set_data_from_numpy(np.array(images, dtype=object))
    with pytest.raises(InferenceServerException) as refused:
        grpc_client.infer("resnet", [tensor])
    assert refused.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert message in str(refused.value.message())
    header = json.dumps(
        {"inputs": [{"name": "data", "shape": [len(images)], "datatype": "BYTES"}]}
    ).encode()
    response = httpx.post(
        f"http://{resnet.rest_url}/v2/models/resnet/infer",
        content=header + length_prefixed(images),
        headers={"Inference-Header-Content-Length": str(len(header))},
    )
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert grpc_client.is_model_ready("resnet")  # nothing else broke


def test_every_format_and_a_model_file_from_config_json(
    models: Models,
    launch_exact: LaunchExact,
    run_graphrt: Callable[..., Any],
    classic_models: Any,
    unused_port: Callable[[], int],
) -> None:
    """Every format in its version folder, the ONNX file itself as `base_path` (version 1), the
    image model with the parameter page's flags as `graphrt --add_to_config` writes them, and a
    model with a string input that takes BYTES as its strings."""
    config = models.root / "config.json"
    entries = [
        {"config": {"name": name, "base_path": f"formats/{name}", "nireq": 1}}
        for name in models.formats
    ]
    entries.append({"config": {"name": "file", "base_path": "file/model.onnx"}})
    classic_models.string_model(models.root / "strings" / "1")
    entries.append({"config": {"name": "strings", "base_path": "strings"}})
    config.write_text(json.dumps({"model_config_list": entries}))
    added = run_graphrt(
        "--add_to_config", "--config_path", str(config), "--model_name", "resnet",
        "--model_path", str(models.root / "resnet"), *PARAMETERS, cwd=models.root,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    grpc_port = unused_port()
    args = ["--config_path", str(config), "--port", str(grpc_port)]
    with launch_exact(args, model="resnet") as server:
        client = triton_http.InferenceServerClient(f"127.0.0.1:{server.port}")
        x = RNG.standard_normal(classic_models.SHAPE).astype(np.float32)
        served = {**models.formats, "file": models.root / "file" / "model.onnx"}
        for name, model_file in served.items():
            metadata = client.get_model_metadata(name)
            assert metadata["versions"] == ["1"], name
            (input_spec,), (output_spec,) = metadata["inputs"], metadata["outputs"]
            tensor = triton_http.InferInput(input_spec["name"], list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            result = client.infer(name, [tensor]).as_numpy(output_spec["name"])
            np.testing.assert_allclose(result, run_directly(model_file, x), rtol=1e-6, err_msg=name)
            np.testing.assert_allclose(result, classic_models.expected(x), rtol=1e-6)
        tensor = triton_http.InferInput("data", [2], "BYTES")
        tensor.set_data_from_numpy(np.array(IMAGES, dtype=object), binary_data=True)
        result = client.infer("resnet", [tensor]).as_numpy("prob")
        np.testing.assert_allclose(result, models.expected(decoded(IMAGES)), rtol=1e-5, atol=1e-5)
        texts = [b"hello", b"wo\x00rld", b""]
        tensor = triton_grpc.InferInput("text", [len(texts)], "BYTES")
        tensor.set_data_from_numpy(np.array(texts, dtype=object))
        grpc_client = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        strings = grpc_client.infer("strings", [tensor]).as_numpy("out")
        assert strings.shape == (3, 1) and strings.ravel().tolist() == texts
