"""OVMS's `pyovms.Tensor`: the packet Python nodes read and write.

A Tensor is a numpy array (so it has Python's buffer protocol on every Python version, and
`bytes(t)`, `np.array(t)`, `memoryview(t)`, `struct.unpack(..., t)` work on it as on OVMS's C++
class) that also carries a name, a KServe `datatype` and a `shape`. As in OVMS, `shape` and
`datatype` describe the tensor as the client sees it and may differ from the buffer: a BYTES or
custom-typed input is one flat buffer of bytes whose `shape` is the request's. `size` is the
buffer's length in bytes, `data` a read-only memoryview of it.

Arithmetic on a Tensor, numpy functions and slices give plain numpy arrays, so a script's
intermediate results never carry a name or a client-facing shape they do not have.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from servables.ov_model.datatypes import KSERVE_TO_NUMPY, NUMPY_TO_KSERVE

Array = np.ndarray[Any, Any]

# KServe datatype -> the struct format character OVMS gives a buffer of that type.
KSERVE_FORMATS = {
    "BOOL": "?",
    "UINT8": "B",
    "UINT16": "H",
    "UINT32": "I",
    "UINT64": "Q",
    "INT8": "b",
    "INT16": "h",
    "INT32": "i",
    "INT64": "q",
    "FP16": "e",
    "FP32": "f",
    "FP64": "d",
}


def datatype_of(array: Array) -> str:
    """The KServe name of the array's element type; otherwise its buffer format (OVMS's rule,
    so a client at least learns what the bytes are: "9w" for numpy's '<U9')."""
    if array.dtype.kind not in "SUO":
        name = NUMPY_TO_KSERVE.get(array.dtype)
        if name is not None:
            return name
    return array.data.format


def _buffer_array(source: Any) -> Array:
    """The source's buffer as a numpy array, without a copy."""
    if isinstance(source, np.ndarray):
        return source
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError(
            "Tensor data must support the buffer protocol (bytes, a numpy array, ...), not "
            f"{type(source).__name__}"
        ) from None
    return np.asarray(view)


class Tensor(np.ndarray):
    """`Tensor(name, buffer, shape=None, datatype=None)`; see the module docstring."""

    # Set on a Tensor made by __new__. A view numpy makes of one (a slice, `reshape`) is a plain
    # array in all but its type: it keeps these defaults, and the properties fall back to numpy's.
    _tensor_name = ""
    _tensor_shape: tuple[int, ...] | None = None
    _tensor_datatype: str | None = None

    def __new__(
        cls,
        name: str,
        buffer: Any = None,
        shape: Sequence[int] | None = None,
        datatype: str | None = None,
        *,
        data: Any = None,
    ) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"Tensor name must be a string, not {type(name).__name__}")
        if datatype is not None and not isinstance(datatype, str):
            raise TypeError(f"Tensor datatype must be a string, not {type(datatype).__name__}")
        source = buffer if buffer is not None else data
        if source is None:
            raise TypeError("Tensor needs data: Tensor(name, buffer, shape=None, datatype=None)")
        array = _buffer_array(source)
        tensor = array.view(cls)
        tensor.flags.writeable = False  # OVMS's buffers are read-only too
        tensor._tensor_name = name
        tensor._tensor_shape = tuple(int(d) for d in (array.shape if shape is None else shape))
        tensor._tensor_datatype = datatype_of(array) if datatype is None else datatype
        return tensor

    @property
    def name(self) -> str:
        return self._tensor_name

    @property
    def datatype(self) -> str:
        if self._tensor_datatype is not None:
            return self._tensor_datatype
        return datatype_of(self.view(np.ndarray))

    @property  # type: ignore[misc]
    def shape(self) -> tuple[int, ...]:
        """The shape clients see (the request's, or the one given); the buffer's is `data.shape`."""
        return self._tensor_shape if self._tensor_shape is not None else super().shape

    @property
    def size(self) -> int:
        """Bytes in the buffer (numpy's `size`, the element count, for views of a Tensor)."""
        return int(self.nbytes) if self._tensor_shape is not None else super().size

    def __array_wrap__(self, array: Array, context: Any = None, return_scalar: bool = False) -> Any:
        result = array.view(np.ndarray)
        return result[()] if return_scalar else result

    def __array_function__(
        self, func: Any, types: Any, args: Iterable[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        """numpy functions see plain arrays (their code reads `.shape` and `.size`)."""
        return func(*_plain(args), **_plain(kwargs))

    def __getitem__(self, key: Any) -> Any:
        return self.view(np.ndarray)[key]

    def __reduce__(self) -> Any:
        return (Tensor, (self.name, self.view(np.ndarray).copy(), self.shape, self.datatype))

    def __repr__(self) -> str:
        return (
            f"Tensor(name={self.name!r}, shape={self.shape}, datatype={self.datatype!r}, "
            f"data={self.view(np.ndarray)!r})"
        )

    __str__ = __repr__


def _plain(value: Any) -> Any:
    """`value` with every Tensor in it (lists, tuples, dict values) as a plain array."""
    if isinstance(value, Tensor):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def expected_size(shape: Sequence[int], datatype: str) -> int | None:
    """Bytes a buffer of `shape` and `datatype` holds; None when the datatype has no fixed
    element size (BYTES, a custom type)."""
    dtype = KSERVE_TO_NUMPY.get(datatype)
    if datatype == "BYTES" or dtype is None:
        return None
    return math.prod(shape) * dtype.itemsize


def from_buffer(name: str, buffer: Any, shape: Sequence[int], datatype: str) -> Tensor:
    """A request's tensor as OVMS hands it to Python: a buffer of `datatype`'s format and
    `shape` for KServe's numeric types; for BYTES and custom types the bytes as sent, flat
    ('B'), with the request's shape and datatype. The caller checks the size first
    (`expected_size`)."""
    fmt = KSERVE_FORMATS.get(datatype)
    if fmt is None:
        array = np.frombuffer(buffer, dtype=np.uint8)
    else:
        array = np.frombuffer(buffer, dtype=np.dtype(fmt)).reshape(tuple(shape))
    return Tensor(name, array, shape=shape, datatype=datatype)
