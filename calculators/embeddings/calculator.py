"""EmbeddingsCalculatorOV: OpenAI's embeddings endpoint over an embeddings servable.

    input_stream: "REQUEST_PAYLOAD:input"
    output_stream: "RESPONSE_PAYLOAD:output"
    node {
      name: "EmbeddingsExecutor"
      input_side_packet: "EMBEDDINGS_NODE_RESOURCES:embeddings_servable"
      calculator: "EmbeddingsCalculatorOV"
      input_stream: "REQUEST_PAYLOAD:input"
      output_stream: "RESPONSE_PAYLOAD:output"
      node_options: {
        [type.googleapis.com / mediapipe.EmbeddingsCalculatorOVOptions]: {
          models_path: "./", normalize_embeddings: true, pooling: MEAN, target_device: "CPU"
        }
      }
    }

OVMS's graph, unchanged: one request packet in, one JSON body out. The servable behind the side
packet batches the inputs of concurrent requests into shared inferences.
"""

from __future__ import annotations

import logging
from typing import ClassVar

from calculators.embeddings.embeddings_calculator_ov_pb2 import EmbeddingsCalculatorOVOptions
from calculators.embeddings.resources import build_embeddings_servable
from calculators.llm.http_llm import request_body
from calculators.llm.payload import HttpPayload
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.embeddings.protocol import parse_embeddings_request, response_body, shorten
from servables.embeddings.servable import EmbeddingsServable
from servables.errors import InvalidRequest, ServableError
from servables.openai.responses import dumps
from servables.openai.tokenize import tokenize_reply

logger = logging.getLogger(__name__)

REQUEST = "REQUEST_PAYLOAD"
RESPONSE = "RESPONSE_PAYLOAD"
RESOURCES = "EMBEDDINGS_NODE_RESOURCES"


@register_calculator
class EmbeddingsCalculatorOV(Calculator):
    options_type = EmbeddingsCalculatorOVOptions
    blocking = False  # process() is async; tokenization and inference run on worker threads
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {
        RESOURCES: build_embeddings_servable
    }

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(RESPONSE, bytes)
        cc.input_side_packets.declare(RESOURCES, dict)
        if cc.options(EmbeddingsCalculatorOVOptions) is None:
            raise ValueError("node_options must carry mediapipe.EmbeddingsCalculatorOVOptions")

    def open(self, cc: CalculatorContext) -> None:
        servables = cc.input_side_packets[RESOURCES].payload
        servable = servables.get(cc.node_name) if isinstance(servables, dict) else None
        if not isinstance(servable, EmbeddingsServable):
            raise ServableError(f"Could not find initialized Embeddings node named: {cc.node_name}")
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
        if not path.endswith("/embeddings"):
            raise InvalidRequest(f"{self.servable.name} is an embeddings model: use /v3/embeddings")
        request = parse_embeddings_request(request_body(payload), self.servable.max_inputs)
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        result = await self.servable.embed(request.texts, request.token_ids)
        vectors = shorten(result.vectors, request.dimensions, self.servable.normalize)
        body = response_body(request.model, vectors, result.prompt_tokens, request.encoding_format)
        cc.outputs[RESPONSE].add(dumps(body).encode(), packet.timestamp)
