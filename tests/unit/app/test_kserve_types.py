"""KServe wire forms: REST JSON with the binary-data extension, gRPC messages, BYTES encoding."""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np
import pytest

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from graphrt.kserve.types import (
    InferRequest,
    InferResponse,
    array_from_raw,
    array_from_values,
    decode_bytes_tensor,
    encode_bytes_tensor,
    raw_bytes,
    request_from_grpc,
    request_from_rest,
    response_to_grpc,
    response_to_rest,
    tensor_from,
)
from servables.errors import InvalidRequest


def rest_body(header: dict[str, Any], *binary: bytes) -> tuple[bytes, int]:
    json_part = json.dumps(header).encode()
    return json_part + b"".join(binary), len(json_part)


def test_bytes_elements_are_length_prefixed() -> None:
    data = np.array([b"a", b"", "ż".encode()], dtype=object)
    raw = encode_bytes_tensor(data)
    assert raw == struct.pack("<I", 1) + b"a" + struct.pack("<I", 0) + struct.pack("<I", 2) + (
        "ż".encode()
    )
    assert decode_bytes_tensor(raw, 3, "t").tolist() == data.tolist()


@pytest.mark.parametrize(
    ("raw", "count", "message"),
    [
        (b"\x05\x00\x00\x00abc", 1, "Invalid BYTES content of input t"),
        (b"\x01\x00", 1, "Invalid BYTES content of input t"),
        (b"\x01\x00\x00\x00a", 2, "Input t holds 1 BYTES elements, its shape needs 2"),
    ],
)
def test_broken_bytes_content_names_the_input(raw: bytes, count: int, message: str) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        decode_bytes_tensor(raw, count, "t")
    assert caught.value.param == "t"


def test_raw_input_is_used_without_a_copy() -> None:
    raw = np.arange(6, dtype=np.float32).tobytes()
    array = array_from_raw(raw, "FP32", [2, 3], "x")
    assert array.base is not None and not array.flags.owndata
    assert array.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_rest_binary_inputs_are_cut_at_their_sizes() -> None:
    a = np.arange(4, dtype=np.int32)
    b = np.array([b"xy", b"z"], dtype=object)
    b_raw = encode_bytes_tensor(b)
    header = {
        "id": "42",
        "inputs": [
            {
                "name": "a",
                "datatype": "INT32",
                "shape": [4],
                "parameters": {"binary_data_size": 16},
            },
            {
                "name": "b",
                "datatype": "BYTES",
                "shape": [2],
                "parameters": {"binary_data_size": len(b_raw)},
            },
            {"name": "c", "datatype": "FP16", "shape": [1], "data": [1.5]},
        ],
        "outputs": [{"name": "o", "parameters": {"binary_data": True}}, {"name": "p"}],
        "parameters": {"OVMS_MP_TIMESTAMP": 5},
    }
    body, length = rest_body(header, a.tobytes(), b_raw)
    request = request_from_rest("m", "2", body, length)
    assert (request.model, request.version, request.id) == ("m", "2", "42")
    assert [t.name for t in request.inputs] == ["a", "b", "c"]
    assert request.inputs[0].data.tolist() == [0, 1, 2, 3]
    assert request.inputs[1].data.tolist() == [b"xy", b"z"]
    assert request.inputs[2].data.dtype == np.float16
    assert request.outputs == ["o", "p"]
    assert request.binary_outputs == {"o"}
    assert request.parameters == {"OVMS_MP_TIMESTAMP": 5}


def test_header_length_larger_than_the_body_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="Inference-Header-Content-Length is 99"):
        request_from_rest("m", "", b"{}", 99)


def test_input_without_data_is_refused() -> None:
    body = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}).encode()
    with pytest.raises(InvalidRequest, match="Input x has neither data nor binary_data_size"):
        request_from_rest("m", "", body, None)


def test_rest_response_puts_binary_outputs_after_the_json() -> None:
    request = InferRequest(model="m", binary_outputs={"raw"})
    response = InferResponse(
        "m",
        "1",
        "7",
        [
            tensor_from("raw", np.array([1.0, 2.0], np.float32)),
            tensor_from("text", np.array(["hé"])),
        ],
    )
    body, length = response_to_rest(response, request)
    assert length is not None
    document = json.loads(body[:length])
    assert document["id"] == "7"
    raw, text = document["outputs"]
    assert raw["parameters"] == {"binary_data_size": 8}
    assert np.frombuffer(body[length:], np.float32).tolist() == [1.0, 2.0]
    assert text == {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["hé"]}


def test_all_outputs_binary_when_the_request_asks_for_it() -> None:
    request = InferRequest(model="m", binary_default=True)
    response = InferResponse("m", "1", "", [tensor_from("y", np.zeros((2, 2), np.int8))])
    body, length = response_to_rest(response, request)
    assert length is not None and len(body) - length == 4


def test_grpc_request_with_raw_contents_and_parameters() -> None:
    message = pb.ModelInferRequest(model_name="m", model_version="3", id="r")
    message.inputs.add(name="x", datatype="UINT16", shape=[2])
    message.raw_input_contents.append(np.array([1, 65535], np.uint16).tobytes())
    message.parameters["flag"].bool_param = True
    message.parameters["n"].int64_param = -4
    message.outputs.add(name="y")
    request = request_from_grpc(message)
    assert request.inputs[0].data.tolist() == [1, 65535]
    assert request.parameters == {"flag": True, "n": -4}
    assert request.outputs == ["y"]


def test_grpc_raw_contents_must_match_the_inputs() -> None:
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="x", datatype="INT8", shape=[1])
    message.inputs.add(name="y", datatype="INT8", shape=[1])
    message.raw_input_contents.append(b"\x01")
    with pytest.raises(InvalidRequest, match="raw_input_contents has 1 entries for 2 inputs"):
        request_from_grpc(message)


def test_fp16_has_no_typed_contents_field() -> None:
    message = pb.ModelInferRequest(model_name="m")
    message.inputs.add(name="h", datatype="FP16", shape=[1])
    with pytest.raises(InvalidRequest, match="Input h of datatype FP16 needs raw_input_contents"):
        request_from_grpc(message)


def test_grpc_response_carries_raw_outputs_and_parameters() -> None:
    response = InferResponse(
        "m",
        "1",
        "r",
        [tensor_from("y", np.array([[True, False]]))],
        {"OVMS_MP_TIMESTAMP": 3, "note": "x"},
    )
    message = response_to_grpc(response)
    assert message.outputs[0].datatype == "BOOL"
    assert list(message.outputs[0].shape) == [1, 2]
    assert message.raw_output_contents[0] == b"\x01\x00"
    assert message.parameters["OVMS_MP_TIMESTAMP"].int64_param == 3
    assert message.parameters["note"].string_param == "x"


def test_tensor_from_openvino_tensor_shares_its_memory() -> None:
    import openvino

    array = np.arange(3, dtype=np.float32)
    tensor = tensor_from("t", openvino.Tensor(array, shared_memory=True))
    assert tensor.datatype == "FP32"
    assert np.shares_memory(tensor.data, array)


def test_tensor_from_python_values() -> None:
    assert tensor_from("n", 5).shape == []
    assert tensor_from("l", [[1, 2]]).datatype == "INT64"
    assert tensor_from("s", "hi").data.tolist() == b"hi"
    with pytest.raises(ValueError, match="has no KServe datatype"):
        tensor_from("c", np.array([1j]))


def test_bytes_values_keep_every_byte_and_their_own_length() -> None:
    values = [["ab\x00", "c"], [b"\x00\x01\x00", b""]]
    array = array_from_values(values, "BYTES", [2, 2], "x")
    assert array.dtype == object
    assert array.tolist() == [[b"ab\x00", b"c"], [b"\x00\x01\x00", b""]]


@pytest.mark.parametrize(
    ("values", "datatype", "message"),
    [
        ([10_000_000_000], "BYTES", "BYTES elements are strings"),
        ([{"a": 1}], "BYTES", "BYTES elements are strings"),
        ([300], "UINT8", "not UINT8 values"),
        ([2**70], "INT64", "not INT64 values"),
        ([[1, 2], [3]], "INT32", "not INT32 values"),
    ],
)
def test_values_that_do_not_fit_the_datatype_are_a_client_error(
    values: Any, datatype: str, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        array_from_values(values, datatype, [len(values)], "x")
    assert caught.value.param == "x"


def test_binary_inputs_are_views_of_the_request_body() -> None:
    values = np.arange(6, dtype=np.float32)
    header = {
        "inputs": [
            {"name": "a", "datatype": "FP32", "shape": [2, 3],
             "parameters": {"binary_data_size": 24}},
            {"name": "b", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}},
        ]
    }  # fmt: skip
    body, length = rest_body(header, values.tobytes(), np.float32(7).tobytes())
    request = request_from_rest("m", "", body, length)
    whole = np.frombuffer(body, np.uint8)
    assert request.inputs[0].data.tolist() == values.reshape(2, 3).tolist()
    assert request.inputs[1].data.tolist() == [7.0]
    assert all(np.shares_memory(tensor.data, whole) for tensor in request.inputs)


def test_outputs_over_bytes_go_out_as_that_buffer() -> None:
    buffer = np.arange(4, dtype=np.float32).tobytes()
    array = np.frombuffer(buffer, np.float32).reshape(2, 2)
    response = InferResponse("m", "1", "", [tensor_from("y", array)])
    message = response_to_grpc(response)
    assert message.raw_output_contents[0] == buffer
    assert raw_bytes(response.outputs[0]) is buffer  # no copy before the wire form
    transposed = tensor_from("t", array.T)  # not the buffer's order: converted
    assert np.frombuffer(raw_bytes(transposed), np.float32).tolist() == [0.0, 2.0, 1.0, 3.0]
