"""KServe wire forms to and from pyovms.Tensor, as OVMS serializes Python nodes' packets."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve.python_tensors import from_python, to_python
from graphrt.kserve.types import (
    InferRequest,
    InferResponse,
    request_from_grpc,
    request_from_rest,
    response_to_grpc,
    response_to_rest,
)
from servables.errors import InvalidRequest
from servables.python_model.tensor import Tensor


def grpc_request(datatype: str, shape: list[int], raw: bytes | None = None) -> InferRequest:
    message = pb.ModelInferRequest(model_name="m")
    tensor = message.inputs.add(name="x", datatype=datatype, shape=shape)
    if raw is not None:
        message.raw_input_contents.append(raw)
    elif datatype == "BYTES":
        tensor.contents.bytes_contents.extend([b"ab", b"c"])
    else:
        tensor.contents.fp32_contents.extend([1.0, 2.0])
    return request_from_grpc(message)


def test_raw_bytes_reach_python_unsplit_whatever_the_shape() -> None:
    """OVMS's quickstart: UTF-8 text as raw contents, shape [len], datatype BYTES."""
    text = b"Make this text uppercase."
    request = grpc_request("BYTES", [len(text)], text)
    tensor = to_python(request.inputs[0])
    assert (bytes(tensor), tensor.shape, tensor.datatype) == (text, (len(text),), "BYTES")


def test_typed_bytes_become_length_prefixed_elements() -> None:
    tensor = to_python(grpc_request("BYTES", [2]).inputs[0])
    assert bytes(tensor) == struct.pack("<I", 2) + b"ab" + struct.pack("<I", 1) + b"c"
    body = json.dumps(
        {"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["hé"]}]}
    )
    rest = to_python(request_from_rest("m", "", body.encode(), None).inputs[0])
    assert bytes(rest) == struct.pack("<I", 3) + "hé".encode()


def test_numeric_inputs_keep_their_type_and_shape() -> None:
    raw = np.arange(6, dtype=np.int64).tobytes()
    tensor = to_python(grpc_request("INT64", [2, 3], raw).inputs[0])
    assert (tensor.shape, tensor.datatype) == ((2, 3), "INT64")
    assert np.array(tensor).tolist() == [[0, 1, 2], [3, 4, 5]]
    typed = to_python(grpc_request("FP32", [2]).inputs[0])
    assert (np.array(typed).tolist(), typed.datatype) == ([1.0, 2.0], "FP32")


def test_custom_datatypes_pass_as_raw_bytes() -> None:
    tensor = to_python(grpc_request("my_string", [3], b"a\0bc\0d\0").inputs[0])
    assert (tensor.datatype, tensor.shape, tensor.size) == ("my_string", (3,), 7)


def test_a_numeric_buffer_must_fill_its_shape() -> None:
    request = grpc_request("FP32", [1, 4], b"\0" * 15)
    with pytest.raises(InvalidRequest, match="got 15 bytes, expected 16 for shape"):
        to_python(request.inputs[0])


def test_python_outputs_go_out_under_their_own_name_type_and_shape() -> None:
    outputs = [
        from_python(Tensor("label", b"tiger")),
        from_python(Tensor("scores", np.array([[0.5, 1.5]], np.float32))),
        from_python(Tensor("odd", b"xyz", shape=[3], datatype="my_type")),
    ]
    message = response_to_grpc(InferResponse("m", "1", "", outputs))
    assert [(o.name, o.datatype, list(o.shape)) for o in message.outputs] == [
        ("label", "UINT8", [5]),
        ("scores", "FP32", [1, 2]),
        ("odd", "my_type", [3]),
    ]
    assert list(message.raw_output_contents) == [b"tiger", struct.pack("2f", 0.5, 1.5), b"xyz"]
    body, _ = response_to_rest(InferResponse("m", "1", "", outputs[:2]), InferRequest("m"))
    assert [o["data"] for o in json.loads(body)["outputs"]] == [list(b"tiger"), [0.5, 1.5]]


def test_an_output_without_a_json_form_must_be_asked_for_as_binary() -> None:
    response = InferResponse("m", "1", "", [from_python(Tensor("odd", b"xyz", datatype="my_t"))])
    with pytest.raises(
        InvalidRequest, match=r"Output odd .* has no JSON form; request it as binary"
    ):
        response_to_rest(response, InferRequest("m"))
    body, length = response_to_rest(response, InferRequest("m", binary_outputs={"odd"}))
    assert length is not None and body[length:] == b"xyz"
