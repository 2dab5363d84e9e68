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
from typing import Any, ClassVar

from calculators.embeddings.embeddings_calculator_ov_pb2 import EmbeddingsCalculatorOVOptions
from calculators.embeddings.resources import build_embeddings_servable
from calculators.encoders.calculator import EncoderCalculator
from calculators.http.apis import Api
from graphruntime import CalculatorContext, register_calculator
from graphruntime.resources import ResourceFactory
from servables.embeddings.protocol import parse_embeddings_request, response_body, shorten
from servables.embeddings.servable import EmbeddingsServable

logger = logging.getLogger(__name__)

RESOURCES = "EMBEDDINGS_NODE_RESOURCES"


@register_calculator
class EmbeddingsCalculatorOV(EncoderCalculator):
    options_type = EmbeddingsCalculatorOVOptions
    resources = RESOURCES
    kind = "Embeddings"
    endpoint = Api.EMBEDDINGS
    model = "an embeddings model"
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {
        RESOURCES: build_embeddings_servable
    }
    servable: EmbeddingsServable

    def open(self, cc: CalculatorContext) -> None:
        self.servable = self.find_servable(cc, EmbeddingsServable)

    async def answer(self, path: str, body: Any) -> dict[str, Any]:
        request = parse_embeddings_request(body, self.servable.max_inputs)
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        result = await self.servable.embed(request.texts, request.token_ids)
        vectors = shorten(result.vectors, request.dimensions, self.servable.normalize)
        return response_body(request.model, vectors, result.prompt_tokens, request.encoding_format)
