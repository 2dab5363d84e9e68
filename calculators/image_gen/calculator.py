"""ImageGenCalculator: OpenAI's image generation and edit endpoints over an image servable.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    node: {
      name: "ImageGenExecutor"
      calculator: "ImageGenCalculator"
      input_stream: "HTTP_REQUEST_PAYLOAD:input"
      input_side_packet: "IMAGE_GEN_NODE_RESOURCES:pipes"
      output_stream: "HTTP_RESPONSE_PAYLOAD:output"
      node_options: {
        [type.googleapis.com / mediapipe.ImageGenCalculatorOptions]: {
          models_path: "./"
          max_resolution: "1024x1024"
          default_num_inference_steps: 20
        }
      }
    }

OVMS's graph, unchanged. `/images/generations` (JSON) runs text-to-image; `/images/edits` (a
form with `image`, and `mask` for inpainting) image-to-image or inpainting. A unary request is
answered by one ImagesResponse; a stream (`"stream": true`) by `partial_image` events as the
denoising goes (`partial_images` of them) and one `completed` event per image.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import ClassVar

from calculators.http.apis import Api
from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import JsonReply, Reply, SseEvents
from calculators.image_audio.node import ImageAudioCalculator
from calculators.image_gen.image_gen_calculator_pb2 import ImageGenCalculatorOptions
from calculators.image_gen.resources import build_image_gen_servable
from graphruntime import register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest
from servables.image_gen.protocol import (
    completed_event,
    parse_edit,
    parse_generation,
    partial_image_event,
    response_body,
)
from servables.image_gen.servable import ImageGenServable, PartialImage
from servables.io.images.images import ImageLimits
from servables.io.request_fields import RequestFields
from servables.runtime.thread_runner import Finished

RESOURCES = "IMAGE_GEN_NODE_RESOURCES"


@register_calculator
class ImageGenCalculator(ImageAudioCalculator):
    options_type = ImageGenCalculatorOptions
    resources = RESOURCES
    kind = "Image Generation"
    apis = (Api.IMAGE_GENERATIONS, Api.IMAGE_EDITS)
    servable_type = ImageGenServable
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_image_gen_servable}
    servable: ImageGenServable

    async def answer(self, api: Api, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        config = self.servable.config
        self.servable.runner.admit()  # a full queue refuses before the uploads are decoded
        if api is Api.IMAGE_EDITS:
            if payload.form is None:
                raise InvalidRequest("/images/edits takes a multipart/form-data body")
            fields = RequestFields(form=payload.form)
            # Decoding the uploads takes a while (large images): off the event loop.
            request = await asyncio.to_thread(parse_edit, fields, config, ImageLimits())
        else:
            request = parse_generation(request_body(payload), config)
        async with aclosing(self.servable.generate(request)) as items:
            async for item in items:
                if isinstance(item, PartialImage):
                    yield SseEvents.of([partial_image_event(request, item.b64, item.index)])
                elif isinstance(item, Finished):
                    result = item.result
                    if request.stream:
                        for image in result.images:
                            yield SseEvents.of([completed_event(request, image, result.usage)])
                    else:
                        yield JsonReply(response_body(request, result.images, result.usage))
