"""OpenVINOModelServerSessionCalculator: a model from the server's repository as a side packet.

    node {
      calculator: "OpenVINOModelServerSessionCalculator"
      output_side_packet: "SESSION:session"
      node_options: {
        [type.googleapis.com / mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {
          servable_name: "resnet"     # a model_config_list entry, or one in the graph's subconfig
          servable_version: "1"       # optional; the latest loaded version by default
        }
      }
    }

As in OVMS, the graph names a model the server serves and OpenVINOInferenceCalculator runs it,
so pre- and post-processing can sit around a model in one graph. The model is looked up when the
run opens, so a version swapped in by a reload is used by the next request, while a request in
flight keeps the version it started with.
"""

from __future__ import annotations

from typing import Protocol

from calculators.openvino.openvino_calculators_pb2 import (
    OpenVINOModelServerSessionCalculatorOptions,
)
from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    GraphService,
    OutputSidePacket,
    register_calculator,
)
from servables.errors import InvalidRequest
from servables.ov_model.model import OpenVINOModel


class ModelSource(Protocol):
    """What the application provides: models by name and version (None: the latest)."""

    def model(self, name: str, version: int | None = None) -> OpenVINOModel: ...


MODELS: GraphService[ModelSource] = GraphService("models", ModelSource)  # type: ignore[type-abstract]


@register_calculator
class OpenVINOModelServerSessionCalculator(Calculator):
    options_type = OpenVINOModelServerSessionCalculatorOptions
    blocking = False
    session = OutputSidePacket("SESSION", OpenVINOModel)

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        super().get_contract(cc)
        cc.use_service(MODELS)

    def open(self, cc: CalculatorContext) -> None:
        options = cc.options(OpenVINOModelServerSessionCalculatorOptions)
        if not options.servable_name:
            raise ValueError("servable_name is not set in the node options")
        version = None
        if options.servable_version:
            try:
                version = int(options.servable_version)
            except ValueError:
                raise InvalidRequest(
                    f"servable_version {options.servable_version!r} is not a number"
                ) from None
        cc.output_side_packets.set(
            self.session, cc.service(MODELS).model(options.servable_name, version)
        )
