"""KServe tensors to and from `pyovms.Tensor`, as OVMS serializes the packets of Python nodes.

A request input for a graph stream whose tag starts with OVMS_PY_TENSOR becomes a Tensor over the
bytes as sent: a KServe numeric datatype must fill its shape exactly; BYTES and custom datatypes
are one flat buffer, whatever the shape says (BYTES sent as typed contents or JSON values become
4-byte little-endian lengths, each followed by its element, OVMS's layout). A Tensor a graph
outputs goes back under its own name, datatype and shape, with its buffer as the raw contents.
"""

from __future__ import annotations

import numpy as np

from graphrt.kserve.types import InferTensor, encode_bytes_tensor
from servables.errors import InvalidRequest
from servables.python_model.tensor import Tensor, expected_size, from_buffer

PREFIX = "OVMS_PY_TENSOR"


def is_python_tag(tag: str) -> bool:
    return tag.startswith(PREFIX)


def to_python(tensor: InferTensor) -> Tensor:
    """A request input as the Tensor a Python node receives."""
    if tensor.raw is None:  # typed contents / JSON values, already checked against the shape
        data = tensor.data
        buffer = (
            encode_bytes_tensor(data)
            if tensor.datatype == "BYTES"
            else np.ascontiguousarray(data).tobytes()
        )
        return from_buffer(tensor.name, buffer, tensor.shape, tensor.datatype)
    size = memoryview(tensor.raw).nbytes
    expected = expected_size(tensor.shape, tensor.datatype)
    if expected is not None and size != expected:
        raise InvalidRequest(
            f"Invalid content size of input {tensor.name}: got {size} bytes, expected {expected} "
            f"for shape {tensor.shape} of {tensor.datatype}",
            param=tensor.name,
        )
    return from_buffer(tensor.name, tensor.raw, tensor.shape, tensor.datatype)


def from_python(tensor: Tensor) -> InferTensor:
    """A Tensor as a response output: its name, datatype and shape, its buffer as raw bytes."""
    flat = np.ascontiguousarray(tensor.view(np.ndarray)).reshape(-1).view(np.uint8)
    return InferTensor(tensor.name, tensor.datatype, list(tensor.shape), raw=flat.data)
