"""RerankCalculatorOV: Cohere's rerank endpoint over a cross-encoder servable.

    input_stream: "REQUEST_PAYLOAD:input"
    output_stream: "RESPONSE_PAYLOAD:output"
    node {
      name: "RerankExecutor"
      input_side_packet: "RERANK_NODE_RESOURCES:rerank_servable"
      calculator: "RerankCalculatorOV"
      input_stream: "REQUEST_PAYLOAD:input"
      output_stream: "RESPONSE_PAYLOAD:output"
      node_options: {
        [type.googleapis.com / mediapipe.RerankCalculatorOVOptions]: {
          models_path: "./", target_device: "CPU"
        }
      }
    }

OVMS's graph, unchanged: one request packet in, one JSON body out. /v2/rerank answers with
Cohere v2's `meta.api_version`, the others with v1's.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from calculators.encoders.calculator import EncoderCalculator
from calculators.http.apis import Api
from calculators.rerank.rerank_calculator_ov_pb2 import RerankCalculatorOVOptions
from calculators.rerank.resources import build_rerank_servable
from graphruntime import CalculatorContext, register_calculator
from graphruntime.resources import ResourceFactory
from servables.rerank.protocol import parse_rerank_request, response_body
from servables.rerank.servable import RerankServable

logger = logging.getLogger(__name__)

RESOURCES = "RERANK_NODE_RESOURCES"


@register_calculator
class RerankCalculatorOV(EncoderCalculator):
    options_type = RerankCalculatorOVOptions
    resources = RESOURCES
    kind = "Rerank"
    endpoint = Api.RERANK
    model = "a rerank model"
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_rerank_servable}
    servable: RerankServable

    def open(self, cc: CalculatorContext) -> None:
        self.servable = self.find_servable(cc, RerankServable)

    async def answer(self, path: str, body: Any) -> dict[str, Any]:
        request = parse_rerank_request(body)
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        result = await self.servable.rerank(
            request.query,
            request.documents,
            request.max_chunks_per_doc,
            request.max_tokens_per_doc,
        )
        version = "2" if path.startswith("/v2/") else "1"
        return response_body(request, result.scores, result.input_tokens, version)
