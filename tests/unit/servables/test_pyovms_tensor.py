"""pyovms.Tensor: OVMS's attributes, the buffer protocol, numpy interop, BYTES and custom types."""

from __future__ import annotations

import io
import pickle
import struct
from typing import Any

import numpy as np
import pytest

import pyovms
from servables.python_model.tensor import Tensor, expected_size, from_buffer


def buffer(tensor: Any) -> memoryview:
    """Python's buffer protocol on the tensor (numpy's stubs declare it for Python 3.12 only)."""
    return memoryview(tensor)


def test_pyovms_is_the_tensor_graphs_pass() -> None:
    assert pyovms.Tensor is Tensor


def test_a_tensor_from_a_numpy_array_takes_its_datatype_shape_and_buffer() -> None:
    values = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = Tensor("x", values)
    assert (tensor.name, tensor.datatype, tensor.shape, tensor.size) == ("x", "FP32", (2, 3), 24)
    view = buffer(tensor)
    assert (view.format, view.shape, view.readonly) == ("f", (2, 3), True)
    assert tensor.data.tobytes() == bytes(tensor) == values.tobytes()
    assert np.shares_memory(np.array(tensor, copy=False), values)  # no copy, as in OVMS
    assert struct.unpack("6f", buffer(tensor)) == tuple(range(6))
    assert io.BytesIO(buffer(tensor)).read(4) == values.tobytes()[:4]


@pytest.mark.parametrize(
    ("dtype", "datatype"),
    [
        (np.bool_, "BOOL"),
        (np.uint8, "UINT8"),
        (np.uint16, "UINT16"),
        (np.uint32, "UINT32"),
        (np.uint64, "UINT64"),
        (np.int8, "INT8"),
        (np.int16, "INT16"),
        (np.int32, "INT32"),
        (np.int64, "INT64"),  # buffer format "l" on Linux; OVMS maps "l" to INT32
        (np.dtype("q"), "INT64"),
        (np.float16, "FP16"),
        (np.float32, "FP32"),
        (np.float64, "FP64"),
    ],
)
def test_kserve_datatypes_follow_the_element_type(dtype: object, datatype: str) -> None:
    assert Tensor("t", np.zeros(2, dtype=dtype)).datatype == datatype


def test_bytes_are_uint8_and_shape_and_datatype_can_be_given() -> None:
    tensor = Tensor("text", b"some text")
    assert (tensor.datatype, tensor.shape, bytes(tensor)) == ("UINT8", (9,), b"some text")
    told = Tensor("t", struct.pack("2f", 1, 2), shape=[1, 2], datatype="FP32")
    assert (told.shape, told.datatype) == ((1, 2), "FP32")
    assert buffer(told).shape == (8,)  # only the attributes change, not the buffer


def test_an_unmapped_type_is_named_by_its_buffer_format() -> None:
    tensor = Tensor("s", np.array("my string"))
    assert tensor.datatype == "9w" == buffer(tensor).format
    assert Tensor("s", np.array(["my", "batched"]), datatype="<U7").datatype == "<U7"


def test_objects_without_a_buffer_are_refused() -> None:
    with pytest.raises(TypeError, match="buffer protocol"):
        Tensor("s", "a str")
    with pytest.raises(TypeError, match="name must be a string"):
        Tensor(1, b"x")  # type: ignore[arg-type]


def test_numpy_results_are_plain_arrays() -> None:
    tensor = Tensor("x", np.arange(4, dtype=np.int32))
    for result in (tensor + 1, np.hstack([tensor, tensor]), tensor[1:], np.sort(tensor)):
        assert type(result) is np.ndarray
    assert float(np.mean(tensor)) == 1.5
    assert tensor.tolist() == [0, 1, 2, 3]


def test_tensors_pickle_with_their_attributes() -> None:
    tensor = Tensor("t", b"abc", shape=[1], datatype="BYTES")
    copy = pickle.loads(pickle.dumps(tensor))
    assert (copy.name, copy.shape, copy.datatype, bytes(copy)) == ("t", (1,), "BYTES", b"abc")


def test_request_buffers_as_ovms_hands_them_over() -> None:
    numeric = from_buffer("n", struct.pack("<2q", 1, -2), [1, 2], "INT64")
    assert (numeric.shape, buffer(numeric).format, np.array(numeric).tolist()) == (
        (1, 2),
        "q",
        [[1, -2]],
    )
    scalar = from_buffer("s", struct.pack("<f", 6.0), [], "FP32")
    assert (scalar.shape, float(np.array(scalar))) == ((), 6.0)
    strings = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 1) + b"c"
    texts = from_buffer("b", strings, [2], "BYTES")
    assert (texts.shape, texts.datatype, bytes(texts)) == ((2,), "BYTES", strings)
    assert buffer(texts).shape == (len(strings),)
    custom = from_buffer("c", b"null0terminated0string0", [3], "my_string")
    assert (custom.shape, custom.datatype, custom.size) == ((3,), "my_string", 23)
    assert (buffer(custom).format, buffer(custom).shape) == ("B", (23,))


def test_expected_size_only_for_fixed_size_types() -> None:
    assert expected_size([2, 3], "FP16") == 12
    assert expected_size([2], "BYTES") is None
    assert expected_size([2], "my_type") is None
