"""PyTensorOvTensorConverterCalculator: between Python nodes and OpenVINO nodes (OVMS's).

    node {
      calculator: "PyTensorOvTensorConverterCalculator"
      input_stream: "OVTENSOR:logits"
      output_stream: "OVMS_PY_TENSOR:logits_py"
      node_options: {
        [type.googleapis.com / mediapipe.PyTensorOvTensorConverterCalculatorOptions]: {
          tag_to_output_tensor_names { key: "OVMS_PY_TENSOR" value: "logits_py" }
        }
      }
    }

One input and one output: OVMS_PY_TENSOR to OVTENSOR turns a `pyovms.Tensor` of a KServe numeric
datatype into an `openvino.Tensor` of its shape (the buffer must hold exactly that many bytes);
OVTENSOR to OVMS_PY_TENSOR turns an `openvino.Tensor` (or numpy array) into a `pyovms.Tensor`
named by `tag_to_output_tensor_names`. Either way the data is copied once, as in OVMS, so neither
side's buffer is shared with the other.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from calculators.openvino.inference import as_array
from calculators.python.python_calculators_pb2 import PyTensorOvTensorConverterCalculatorOptions
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.ov_model.datatypes import KSERVE_TO_NUMPY, NUMPY_TO_KSERVE, OPENVINO_TO_KSERVE
from servables.python_model.tensor import Tensor

PY_TENSOR = "OVMS_PY_TENSOR"
OV_TENSOR = "OVTENSOR"
NAME = "PyTensorOvTensorConverterCalculator"


def to_openvino(tensor: Tensor) -> Any:
    """An openvino.Tensor holding a copy of the Python tensor's buffer, as datatype and shape."""
    import openvino

    dtype = KSERVE_TO_NUMPY.get(tensor.datatype)
    if dtype is None or tensor.datatype == "BYTES":
        raise ValueError(
            f"pyovms.Tensor {tensor.name!r} has datatype {tensor.datatype!r}, which has no "
            "OpenVINO element type"
        )
    shape = tensor.shape
    if any(dim < 0 for dim in shape):
        raise ValueError(f"pyovms.Tensor {tensor.name!r} has a negative dimension: {shape}")
    expected = math.prod(shape) * dtype.itemsize
    if tensor.size != expected:
        raise ValueError(
            f"pyovms.Tensor {tensor.name!r} holds {tensor.size} bytes, but an OpenVINO tensor "
            f"of shape {list(shape)} and {tensor.datatype} holds {expected}"
        )
    raw = np.ascontiguousarray(tensor.view(np.ndarray)).reshape(-1).view(np.uint8)
    array = raw.view(dtype).reshape(shape).copy()  # the one copy; OpenVINO then shares it
    return openvino.Tensor(array, shared_memory=True)


def to_python(name: str, value: Any) -> Tensor:
    """A pyovms.Tensor named `name` from an openvino.Tensor or numpy array (copied)."""
    element_type = getattr(value, "element_type", None)
    if element_type is not None:
        type_name = element_type.get_type_name()
        datatype = OPENVINO_TO_KSERVE.get(type_name)
    else:
        type_name = str(getattr(value, "dtype", type(value).__name__))
        datatype = NUMPY_TO_KSERVE.get(getattr(value, "dtype", None))  # type: ignore[arg-type]
    if datatype is None or datatype == "BYTES":
        raise ValueError(f"An OpenVINO tensor of type {type_name} has no pyovms.Tensor datatype")
    array = np.array(as_array(value, f"input {OV_TENSOR}"), copy=True)
    return Tensor(name, array, datatype=datatype)


@register_calculator
class PyTensorOvTensorConverterCalculator(Calculator):
    options_type = PyTensorOvTensorConverterCalculatorOptions
    blocking = False  # one copy of one tensor

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        if len(cc.inputs) != 1 or len(cc.outputs) != 1:
            raise ValueError(f"{NAME} takes exactly one input stream and one output stream")
        direction = (cc.inputs.tags()[0], cc.outputs.tags()[0])
        if direction == (OV_TENSOR, PY_TENSOR):
            options = cc.options(PyTensorOvTensorConverterCalculatorOptions)
            if options is None or PY_TENSOR not in options.tag_to_output_tensor_names:
                raise ValueError(
                    f"Converting {OV_TENSOR} to {PY_TENSOR} needs the name of the Python tensor: "
                    f'tag_to_output_tensor_names {{ key: "{PY_TENSOR}" value: "<name>" }}'
                )
            cc.inputs.declare(OV_TENSOR)
            cc.outputs.declare(PY_TENSOR, Tensor)
        elif direction == (PY_TENSOR, OV_TENSOR):
            cc.inputs.declare(PY_TENSOR, Tensor)
            cc.outputs.declare(OV_TENSOR)
        else:
            raise ValueError(
                f"{NAME} converts between tags {PY_TENSOR} and {OV_TENSOR}: one stream must have "
                f"each (got input {direction[0]!r}, output {direction[1]!r})"
            )
        cc.set_timestamp_offset(0)

    def open(self, cc: CalculatorContext) -> None:
        options = cc.options(PyTensorOvTensorConverterCalculatorOptions)
        self.to_python = cc.inputs.tag_map.tags()[0] == OV_TENSOR
        self.name = options.tag_to_output_tensor_names.get(PY_TENSOR, "")

    def process(self, cc: CalculatorContext) -> None:
        if self.to_python:
            cc.outputs[PY_TENSOR].add(to_python(self.name, cc.inputs[OV_TENSOR].payload))
            return
        tensor = cc.inputs[PY_TENSOR].payload
        if not isinstance(tensor, Tensor):
            raise ValueError(
                f"input {PY_TENSOR} carries a {type(tensor).__name__}, not a pyovms.Tensor"
            )
        cc.outputs[OV_TENSOR].add(to_openvino(tensor))
