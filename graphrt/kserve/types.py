"""KServe v2 requests and responses as protocol-neutral objects, and their wire forms.

REST (JSON, plus the binary-data extension Triton and KServe clients use) and gRPC (typed
contents or `raw_input_contents`) both convert to and from these types, so the data plane behind
them is written once. Tensors are numpy arrays; raw bytes are kept as received and become
arrays, when first read, without a copy (`np.frombuffer` over the received buffer, sliced with
memoryviews), and an output array over a `bytes` buffer (what the model servable returns) is sent
as that buffer; BYTES tensors hold Python `bytes` objects.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphrt.kserve import grpc_predict_v2_pb2 as pb
from servables.errors import InvalidRequest
from servables.ov_model.datatypes import KSERVE_TO_NUMPY, kserve_name

Array = np.ndarray[Any, Any]
Buffer = bytes | memoryview

# KServe datatype -> InferTensorContents field for typed gRPC contents.
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}


class InferTensor:
    """One tensor of a request or response.

    A tensor that travels as raw bytes (gRPC's raw_input_contents, REST's binary data, what a
    Python node produced) keeps them in `raw`, and `data` decodes them on first use: a graph
    input that takes the bytes as sent (a Python node's, where a datatype may be custom and BYTES
    stay one buffer) never decodes them, nor fails to.
    """

    __slots__ = ("_data", "datatype", "name", "parameters", "raw", "shape")

    def __init__(
        self,
        name: str,
        datatype: str,
        shape: list[int],
        data: Array | None = None,
        parameters: dict[str, Any] | None = None,
        *,
        raw: Buffer | None = None,
    ) -> None:
        if data is None and raw is None:
            raise ValueError(f"tensor {name} needs data or raw bytes")
        self.name = name
        self.datatype = datatype
        self.shape = shape
        self._data = data
        self.parameters = parameters if parameters is not None else {}
        self.raw = raw

    @property
    def data(self) -> Array:
        """The values as a numpy array (a view of `raw`, where that is their layout)."""
        if self._data is None:
            assert self.raw is not None
            self._data = array_from_raw(self.raw, self.datatype, self.shape, self.name)
        return self._data


@dataclass
class InferRequest:
    model: str
    version: str = ""
    id: str = ""
    inputs: list[InferTensor] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # empty: all
    parameters: dict[str, Any] = field(default_factory=dict)
    binary_outputs: set[str] = field(default_factory=set)  # REST binary-data extension
    binary_default: bool = False


@dataclass
class InferResponse:
    model: str
    version: str
    id: str
    outputs: list[InferTensor]
    parameters: dict[str, Any] = field(default_factory=dict)


def tensor_from(name: str, value: Any) -> InferTensor:
    """A response tensor from whatever a model or graph produced (ndarray, ov.Tensor, list...)."""
    data = getattr(value, "data", None) if not isinstance(value, np.ndarray) else value
    if data is None or not isinstance(data, np.ndarray):
        data = value if isinstance(value, np.ndarray) else np.asarray(value)
    if data.dtype.kind in ("U", "S"):
        data = np.array(
            [s.encode() if isinstance(s, str) else s for s in data.ravel()], dtype=object
        ).reshape(data.shape)
    return InferTensor(name, kserve_name(data.dtype), list(data.shape), data)


def _element_count(shape: Sequence[int], name: str) -> int:
    if any(dim < 0 for dim in shape):
        raise InvalidRequest(f"Invalid shape of input {name}: {list(shape)}", param=name)
    return math.prod(shape)


def _dtype(datatype: str, name: str) -> np.dtype[np.generic]:
    dtype = KSERVE_TO_NUMPY.get(datatype)
    if dtype is None:
        raise InvalidRequest(f"Unsupported datatype {datatype!r} of input {name}", param=name)
    return dtype


def decode_bytes_tensor(raw: Buffer, count: int, name: str) -> Array:
    """BYTES raw form: each element is a 4-byte little-endian length and that many bytes."""
    items: list[bytes] = []
    offset = 0
    while offset < len(raw):
        if offset + 4 > len(raw):
            raise InvalidRequest(f"Invalid BYTES content of input {name}", param=name)
        (length,) = struct.unpack_from("<I", raw, offset)
        offset += 4
        if offset + length > len(raw):
            raise InvalidRequest(f"Invalid BYTES content of input {name}", param=name)
        items.append(bytes(raw[offset : offset + length]))
        offset += length
    if len(items) != count:
        raise InvalidRequest(
            f"Input {name} holds {len(items)} BYTES elements, its shape needs {count}", param=name
        )
    return np.array(items, dtype=object)


def encode_bytes_tensor(data: Array) -> bytes:
    return b"".join(
        struct.pack("<I", len(item)) + item
        for item in (x if isinstance(x, bytes) else str(x).encode() for x in data.ravel())
    )


def array_from_raw(raw: Buffer, datatype: str, shape: Sequence[int], name: str) -> Array:
    """An input tensor from its raw bytes (binary extension or raw_input_contents)."""
    count = _element_count(shape, name)
    if datatype == "BYTES":
        return decode_bytes_tensor(raw, count, name).reshape(shape)
    dtype = _dtype(datatype, name)
    expected = count * dtype.itemsize
    size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
    if size != expected:
        raise InvalidRequest(
            f"Invalid content size of input {name}: got {size} bytes, expected {expected} "
            f"for shape {list(shape)} of {datatype}",
            param=name,
        )
    return np.frombuffer(raw, dtype=dtype.newbyteorder("<")).reshape(shape)


def _bytes_elements(values: Any, name: str) -> Iterator[bytes]:
    """The BYTES elements of a (nested) list, each as it came: no fixed-width numpy array,
    which would strip trailing NULs and pad every element to the longest one."""
    if isinstance(values, bytes):
        yield values
    elif isinstance(values, str):
        yield values.encode()
    elif isinstance(values, Sequence):
        for value in values:
            yield from _bytes_elements(value, name)
    else:
        raise InvalidRequest(
            f"Invalid data of input {name}: BYTES elements are strings", param=name
        )


def array_from_values(values: Any, datatype: str, shape: Sequence[int], name: str) -> Array:
    """An input tensor from typed values (JSON `data` or gRPC typed contents)."""
    count = _element_count(shape, name)
    if datatype == "BYTES":
        array = np.array(list(_bytes_elements(values, name)), dtype=object)
    else:
        try:
            array = np.asarray(values, dtype=_dtype(datatype, name)).ravel()
        except (TypeError, ValueError, OverflowError) as error:
            raise InvalidRequest(
                f"Invalid data of input {name}: not {datatype} values", param=name
            ) from error
    if array.size != count:
        raise InvalidRequest(
            f"Input {name} holds {array.size} values, its shape {list(shape)} needs {count}",
            param=name,
        )
    return array.reshape(shape)


# ----------------------------------------------------------------------------------- gRPC


def parameter_value(parameter: Any) -> Any:
    kind = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, kind) if kind else None


def set_parameter(target: Any, value: Any) -> None:
    if isinstance(value, bool):
        target.bool_param = value
    elif isinstance(value, int):
        target.int64_param = value
    elif isinstance(value, float):
        target.double_param = value
    else:
        target.string_param = str(value)


def request_from_grpc(message: Any) -> InferRequest:
    inputs: list[InferTensor] = []
    declared = message.inputs
    raw_contents = message.raw_input_contents
    if raw_contents and len(raw_contents) != len(declared):
        raise InvalidRequest(
            f"raw_input_contents has {len(raw_contents)} entries for {len(declared)} inputs"
        )
    for index, tensor in enumerate(declared):
        name, datatype, shape = tensor.name, tensor.datatype, list(tensor.shape)
        parameters = _parameters(tensor.parameters)
        if raw_contents:
            _element_count(shape, name)
            inputs.append(
                InferTensor(name, datatype, shape, None, parameters, raw=raw_contents[index])
            )
            continue
        field_name = CONTENTS_FIELD.get(datatype)
        if field_name is None:
            raise InvalidRequest(
                f"Input {name} of datatype {datatype} needs raw_input_contents", param=name
            )
        values = list(getattr(tensor.contents, field_name))
        data = array_from_values(values, datatype, shape, name)
        inputs.append(InferTensor(name, datatype, shape, data, parameters))
    return InferRequest(
        message.model_name,
        message.model_version,
        message.id,
        inputs,
        [output.name for output in message.outputs] if message.outputs else [],
        _parameters(message.parameters),
    )


def _parameters(given: Any) -> dict[str, Any]:
    """A protobuf parameters map as a dict (most requests have none: skip the loop)."""
    return {k: parameter_value(v) for k, v in given.items()} if given else {}


def response_to_grpc(response: InferResponse) -> Any:
    """Outputs go as raw_output_contents (what Triton and OVMS send)."""
    message = pb.ModelInferResponse(
        model_name=response.model, model_version=response.version, id=response.id
    )
    for key, value in response.parameters.items():
        set_parameter(message.parameters[key], value)
    for tensor in response.outputs:
        output = message.outputs.add(name=tensor.name, datatype=tensor.datatype, shape=tensor.shape)
        for key, value in tensor.parameters.items():
            set_parameter(output.parameters[key], value)
        message.raw_output_contents.append(raw_bytes(tensor))
    return message


def raw_buffer(tensor: InferTensor) -> Buffer:
    """The tensor's raw form (little-endian values, row-major; length-prefixed for BYTES) as a
    buffer, without copying when the array's memory already is that form."""
    if tensor.raw is not None:
        return tensor.raw
    if tensor.datatype == "BYTES":
        return encode_bytes_tensor(tensor.data)
    data = tensor.data
    base: object = data.base
    while isinstance(base, np.ndarray):  # a reshaped view of a view of the buffer...
        base = base.base
    native = data.dtype.newbyteorder("<") == data.dtype
    if type(base) is bytes and data.flags.c_contiguous and data.nbytes == len(base) and native:
        return base  # e.g. an input passed through a graph: the request's own bytes
    contiguous: Any = (
        data
        if data.flags.c_contiguous and native
        else np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<"))
    )
    return memoryview(contiguous).cast("B")


def raw_bytes(tensor: InferTensor) -> bytes:
    """`raw_buffer` as bytes (what protobuf fields take)."""
    buffer = raw_buffer(tensor)
    return buffer if isinstance(buffer, bytes) else buffer.tobytes()


# ----------------------------------------------------------------------------------- REST

BINARY_HEADER = "Inference-Header-Content-Length"


def request_from_rest(
    model: str, version: str, body: bytes, header_length: int | None
) -> InferRequest:
    """JSON request, optionally followed by binary tensor data (the binary-data extension)."""
    view = memoryview(body)  # the tensors below are views of the body, not copies
    json_part = body if header_length is None else bytes(view[:header_length])
    binary = view[:0] if header_length is None else view[header_length:]
    if header_length is not None and not 0 <= header_length <= len(body):
        raise InvalidRequest(
            f"{BINARY_HEADER} is {header_length} but the body has {len(body)} bytes"
        )
    try:
        document = json.loads(json_part)
    except (ValueError, UnicodeDecodeError) as error:
        raise InvalidRequest(f"The request body is not valid JSON: {error}") from error
    if not isinstance(document, dict):
        raise InvalidRequest("The request body must be a JSON object")
    raw_inputs = document.get("inputs")
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise InvalidRequest("inputs must be a non-empty array")
    inputs: list[InferTensor] = []
    offset = 0
    for entry in raw_inputs:
        if not isinstance(entry, dict):
            raise InvalidRequest("every input must be an object")
        name, datatype, shape = entry.get("name"), entry.get("datatype"), entry.get("shape")
        if not isinstance(name, str):
            raise InvalidRequest("every input needs a name")
        if not isinstance(datatype, str):
            raise InvalidRequest(f"Input {name} needs a datatype", param=name)
        if not isinstance(shape, list) or not all(isinstance(d, int) for d in shape):
            raise InvalidRequest(f"Input {name} needs a shape (a list of integers)", param=name)
        parameters = entry.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise InvalidRequest(f"parameters of input {name} must be an object", param=name)
        size = parameters.get("binary_data_size")
        if size is None and len(raw_inputs) == 1 and datatype == "BYTES" and "data" not in entry:
            size = binary.nbytes  # OVMS: a lone BYTES input may leave its size out
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > binary.nbytes:
                raise InvalidRequest(
                    f"Invalid binary_data_size of input {name}: {size} bytes from offset "
                    f"{offset}, but {binary.nbytes} binary bytes were sent",
                    param=name,
                )
            _element_count(shape, name)
            raw = binary[offset : offset + size]
            offset += size
            inputs.append(InferTensor(name, datatype, shape, None, dict(parameters), raw=raw))
        elif "data" in entry:
            data = array_from_values(entry["data"], datatype, shape, name)
            inputs.append(InferTensor(name, datatype, shape, data, dict(parameters)))
        else:
            raise InvalidRequest(f"Input {name} has neither data nor binary_data_size", param=name)
    if offset != binary.nbytes:
        raise InvalidRequest(
            f"{binary.nbytes - offset} bytes of binary data are not claimed by any input"
        )
    request = InferRequest(model=model, version=version, id=str(document.get("id", "")))
    request.inputs = inputs
    parameters = document.get("parameters") or {}
    request.parameters = parameters if isinstance(parameters, dict) else {}
    request.binary_default = bool(request.parameters.get("binary_data_output"))
    for output in document.get("outputs") or []:
        if isinstance(output, dict) and isinstance(output.get("name"), str):
            request.outputs.append(output["name"])
            if (output.get("parameters") or {}).get("binary_data"):
                request.binary_outputs.add(output["name"])
    return request


def _json_values(data: Array) -> list[Any]:
    if data.dtype == object:
        return [x.decode(errors="replace") if isinstance(x, bytes) else x for x in data.ravel()]
    values: list[Any] = data.ravel().tolist()
    return values


def _json_data(tensor: InferTensor) -> list[Any]:
    """An output's JSON values; one whose bytes are not values of its datatype and shape (a
    Python node's custom datatype, say) can only go as binary data."""
    try:
        return _json_values(tensor.data)
    except InvalidRequest:
        raw = raw_buffer(tensor)
        size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
        raise InvalidRequest(
            f"Output {tensor.name} ({tensor.datatype}, shape {tensor.shape}, {size} bytes) has no "
            'JSON form; request it as binary data (the output\'s "binary_data" parameter, or '
            '"binary_data_output")',
            param=tensor.name,
        ) from None


def response_to_rest(response: InferResponse, request: InferRequest) -> tuple[bytes, int | None]:
    """JSON body (and the length of its JSON part when binary outputs follow it)."""
    outputs: list[dict[str, Any]] = []
    binary: list[Buffer] = []
    for tensor in response.outputs:
        entry: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": tensor.shape,
        }
        if request.binary_default or tensor.name in request.binary_outputs:
            raw = raw_buffer(tensor)  # joined into the body below: the only copy
            size = raw.nbytes if isinstance(raw, memoryview) else len(raw)
            entry["parameters"] = {**tensor.parameters, "binary_data_size": size}
            binary.append(raw)
        else:
            if tensor.parameters:
                entry["parameters"] = tensor.parameters
            entry["data"] = _json_data(tensor)
        outputs.append(entry)
    document: dict[str, Any] = {
        "model_name": response.model,
        "model_version": response.version,
        "outputs": outputs,
    }
    if response.id:
        document["id"] = response.id
    if response.parameters:
        document["parameters"] = response.parameters
    header = json.dumps(document).encode()
    if not binary:
        return header, None
    return b"".join([header, *binary]), len(header)
