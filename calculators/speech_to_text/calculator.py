"""S2tCalculator: OpenAI's transcription and translation endpoints over a Whisper servable.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    node {
      name: "S2tExecutor"
      calculator: "S2tCalculator"
      input_side_packet: "STT_NODE_RESOURCES:s2t_servable"
      input_stream: "LOOPBACK:loopback"
      input_stream: "HTTP_REQUEST_PAYLOAD:input"
      output_stream: "LOOPBACK:loopback"
      output_stream: "HTTP_RESPONSE_PAYLOAD:output"
      input_stream_info: { tag_index: 'LOOPBACK:0', back_edge: true }
      node_options: {
        [type.googleapis.com / mediapipe.S2tCalculatorOptions]: {
          models_path: "./"
          enable_word_timestamps: true
        }
      }
      input_stream_handler {
        input_stream_handler: "SyncSetInputStreamHandler",
        options {
          [mediapipe.SyncSetInputStreamHandlerOptions.ext] { sync_set { tag_index: "LOOPBACK:0" } }
        }
      }
    }

OVMS's graph, unchanged (the LOOPBACK edge is optional). A form with the audio `file` in; the
transcript out in the requested `response_format`, or, with `stream=true`, one
`transcript.text.delta` event per decoded piece of text (one per LOOPBACK cycle) and a closing
`transcript.text.done`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import ClassVar

from calculators.http.apis import Api
from calculators.http.payload import HttpPayload
from calculators.http.replies import HttpReply, Reply, SseEvents
from calculators.image_audio.node import ImageAudioCalculator
from calculators.speech_to_text.resources import build_transcription_servable
from calculators.speech_to_text.s2t_calculator_pb2 import S2tCalculatorOptions
from graphruntime import register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest
from servables.io.request_fields import RequestFields
from servables.runtime.thread_runner import Finished
from servables.speech_to_text.protocol import (
    delta_event,
    done_event,
    parse_transcription,
    response,
)
from servables.speech_to_text.servable import TranscriptionServable

RESOURCES = "STT_NODE_RESOURCES"


@register_calculator
class S2tCalculator(ImageAudioCalculator):
    options_type = S2tCalculatorOptions
    resources = RESOURCES
    kind = "Speech to text"
    apis = (Api.TRANSCRIPTIONS, Api.TRANSLATIONS)
    servable_type = TranscriptionServable
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {
        RESOURCES: build_transcription_servable
    }
    servable: TranscriptionServable

    async def answer(self, api: Api, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        if payload.form is None:
            raise InvalidRequest(f"{api.value} takes a multipart/form-data body with the file")
        request = parse_transcription(
            RequestFields(form=payload.form),
            self.servable.name,
            translate=api is Api.TRANSLATIONS,
            word_timestamps=self.servable.config.word_timestamps,
        )
        async with aclosing(await self.servable.transcribe(request)) as items:
            async for item in items:
                if isinstance(item, Finished):
                    if request.stream:
                        yield SseEvents.of([done_event(item.result.text)])
                    else:
                        yield HttpReply(*response(request, item.result))
                else:
                    yield SseEvents.of([delta_event(item)])
