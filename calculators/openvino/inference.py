"""OpenVINOInferenceCalculator: run the SESSION's model on the node's input packets (OVMS's).

    node {
      calculator: "OpenVINOInferenceCalculator"
      input_side_packet: "SESSION:session"
      input_stream: "OVTENSOR_IMAGE:image"          # tags name model inputs...
      output_stream: "OVTENSOR_SCORES:scores"
      node_options: {
        [type.googleapis.com / mediapipe.OpenVINOInferenceCalculatorOptions]: {
          tag_to_input_tensor_names { key: "OVTENSOR_IMAGE" value: "pixel_values" }  # ...or map
          tag_to_output_tensor_names { key: "OVTENSOR_SCORES" value: "logits" }
        }
      }
    }

Each input tag is one model input: the tag itself, or the name `tag_to_input_tensor_names`
maps it to. A tag starting with OVTENSORS or TENSORS carries a list of tensors instead, matched to
`input_order_list` (outputs likewise with `output_order_list`). Packets may hold numpy arrays or
`openvino.Tensor`s; both reach the model without a copy. Outputs on tags starting with OVTENSOR
are `openvino.Tensor`s, all others numpy arrays. Every input must have a packet at each timestamp
(MediaPipe's default input policy), and inference runs on the model's pool of infer requests
without blocking the event loop, so requests from many graph runs overlap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from calculators.openvino.openvino_calculators_pb2 import OpenVINOInferenceCalculatorOptions
from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    InputSidePacket,
    register_calculator,
)
from servables.ov_model.model import OpenVINOModel

Array = np.ndarray[Any, Any]
SESSION = "SESSION"
VECTOR_TAGS = ("OVTENSORS", "TENSORS")


def is_vector_tag(tag: str) -> bool:
    return tag.startswith(VECTOR_TAGS)


def as_array(value: Any, what: str) -> Array:
    """numpy view of an ndarray or openvino.Tensor payload."""
    if isinstance(value, np.ndarray):
        return value
    data = getattr(value, "data", None)
    if isinstance(data, np.ndarray):
        return data
    raise TypeError(f"{what} must be a numpy array or openvino.Tensor, got {type(value).__name__}")


def as_payload(tag: str, array: Array) -> Any:
    if tag.startswith("OVTENSOR"):
        import openvino

        return openvino.Tensor(array, shared_memory=True)
    return array


@register_calculator
class OpenVINOInferenceCalculator(Calculator):
    options_type = OpenVINOInferenceCalculatorOptions
    blocking = False
    session = InputSidePacket(SESSION, OpenVINOModel)

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        super().get_contract(cc)
        if len(cc.inputs.tag_map) == 0 or len(cc.outputs.tag_map) == 0:
            raise ValueError("OpenVINOInferenceCalculator needs at least one input and one output")
        cc.inputs.declare_all()
        cc.outputs.declare_all()
        cc.set_timestamp_offset(0)

    def open(self, cc: CalculatorContext) -> None:
        options = cc.options(OpenVINOInferenceCalculatorOptions)
        self.model: OpenVINOModel = cc.input_side_packets[self.session].payload
        self.input_names: Mapping[str, str] = dict(options.tag_to_input_tensor_names)
        self.output_names: Mapping[str, str] = dict(options.tag_to_output_tensor_names)
        self.input_order = list(options.input_order_list)
        self.output_order = list(options.output_order_list)

    def _inputs(self, cc: CalculatorContext) -> dict[str, Array]:
        inputs: dict[str, Array] = {}
        for tag, index, _ in cc.inputs.tag_map.items():
            packet = cc.inputs[tag, index]
            if packet.is_empty():
                raise ValueError(
                    f"input {tag} has no packet at {cc.input_timestamp}; every input needs one "
                    "at each timestamp"
                )
            if is_vector_tag(tag):
                tensors = list(packet.payload)
                if len(tensors) != len(self.input_order):
                    raise ValueError(
                        f"input {tag} holds {len(tensors)} tensors but input_order_list names "
                        f"{len(self.input_order)}"
                    )
                for name, tensor in zip(self.input_order, tensors, strict=True):
                    inputs[name] = as_array(tensor, f"element of {tag}")
            else:
                inputs[self.input_names.get(tag, tag)] = as_array(packet.payload, f"input {tag}")
        return inputs

    async def process(self, cc: CalculatorContext) -> None:
        results = await self.model.infer(self._inputs(cc))
        for tag, index, _ in cc.outputs.tag_map.items():
            if is_vector_tag(tag):
                names = self.output_order or list(results)
                missing = [name for name in names if name not in results]
                if missing:
                    raise ValueError(f"output_order_list names {missing[0]!r}, not a model output")
                cc.outputs[tag, index].add([as_payload(tag, results[name]) for name in names])
                continue
            name = self.output_names.get(tag, tag)
            if name not in results:
                raise ValueError(
                    f"output {tag} maps to {name!r}, which {self.model.name} does not produce "
                    f"(outputs: {', '.join(results)})"
                )
            cc.outputs[tag, index].add(as_payload(tag, results[name]))
