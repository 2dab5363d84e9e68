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
from typing import ClassVar

from calculators.llm.http_llm import request_body
from calculators.llm.payload import HttpPayload
from calculators.rerank.rerank_calculator_ov_pb2 import RerankCalculatorOVOptions
from calculators.rerank.resources import build_rerank_servable
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest, ServableError
from servables.openai.responses import dumps
from servables.openai.tokenize import tokenize_reply
from servables.rerank.protocol import parse_rerank_request, response_body
from servables.rerank.servable import RerankServable

logger = logging.getLogger(__name__)

REQUEST = "REQUEST_PAYLOAD"
RESPONSE = "RESPONSE_PAYLOAD"
RESOURCES = "RERANK_NODE_RESOURCES"


@register_calculator
class RerankCalculatorOV(Calculator):
    options_type = RerankCalculatorOVOptions
    blocking = False  # process() is async; tokenization and inference run on worker threads
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_rerank_servable}

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(RESPONSE, bytes)
        cc.input_side_packets.declare(RESOURCES, dict)
        if cc.options(RerankCalculatorOVOptions) is None:
            raise ValueError("node_options must carry mediapipe.RerankCalculatorOVOptions")

    def open(self, cc: CalculatorContext) -> None:
        servables = cc.input_side_packets[RESOURCES].payload
        servable = servables.get(cc.node_name) if isinstance(servables, dict) else None
        if not isinstance(servable, RerankServable):
            raise ServableError(f"Could not find initialized Rerank node named: {cc.node_name}")
        self.servable = servable

    async def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[REQUEST]
        payload: HttpPayload = packet.payload
        path = payload.uri.split("?", 1)[0].rstrip("/")
        if path.endswith("/tokenize"):
            reply = await tokenize_reply(
                self.servable.tokenize, request_body(payload), self.servable.context
            )
            cc.outputs[RESPONSE].add(reply, packet.timestamp)
            return
        if not path.endswith("/rerank"):
            raise InvalidRequest(f"{self.servable.name} is a rerank model: use /v3/rerank")
        request = parse_rerank_request(request_body(payload))
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        result = await self.servable.rerank(
            request.query,
            request.documents,
            request.max_chunks_per_doc,
            request.max_tokens_per_doc,
        )
        version = "2" if path.startswith("/v2/") else "1"
        body = response_body(request, result.scores, result.input_tokens, version)
        cc.outputs[RESPONSE].add(dumps(body).encode(), packet.timestamp)
