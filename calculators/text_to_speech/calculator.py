"""T2sCalculator: OpenAI's speech endpoint over a text-to-speech servable.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    node {
      name: "T2sExecutor"
      calculator: "T2sCalculator"
      input_side_packet: "TTS_NODE_RESOURCES:t2s_servable"
      input_stream: "HTTP_REQUEST_PAYLOAD:input"
      output_stream: "HTTP_RESPONSE_PAYLOAD:output"
      node_options: {
        [type.googleapis.com / mediapipe.T2sCalculatorOptions]: {
          models_path: "./"
          voices: [ { name: "alloy", path: "voices/alloy.bin" } ]
        }
      }
    }

OVMS's graph, unchanged. A JSON request in; the audio out as one file of the requested
`response_format`, or, with `stream_format: "sse"`, one `speech.audio.delta` event per sentence
as soon as it is spoken and a closing `speech.audio.done`.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import ClassVar

import numpy as np

from calculators.http.apis import Api
from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import HttpReply, Reply, SseEvents
from calculators.media.node import MediaCalculator
from calculators.text_to_speech.resources import build_speech_servable
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from graphruntime import register_calculator
from graphruntime.resources import ResourceFactory
from servables.audio.codec import encode_audio
from servables.pipelines.runner import Finished
from servables.text_to_speech.protocol import delta_event, done_event, parse_speech
from servables.text_to_speech.servable import SpeechServable, SpokenSentence

RESOURCES = "TTS_NODE_RESOURCES"


@register_calculator
class T2sCalculator(MediaCalculator):
    options_type = T2sCalculatorOptions
    resources = RESOURCES
    kind = "Text to speech"
    apis = (Api.SPEECH,)
    servable_type = SpeechServable
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_speech_servable}
    servable: SpeechServable

    async def answer(self, api: Api, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        servable = self.servable
        request = parse_speech(request_body(payload), servable.name, servable.config.speed_range)
        spoken: list[SpokenSentence] = []
        async with aclosing(servable.speak(request)) as items:
            async for item in items:
                if isinstance(item, SpokenSentence):
                    if request.stream:
                        data, _ = await asyncio.to_thread(
                            encode_audio, item.samples, item.rate, request.response_format
                        )
                        yield SseEvents.of([delta_event(base64.b64encode(data).decode("ascii"))])
                    else:
                        spoken.append(item)
                elif isinstance(item, Finished):
                    if request.stream:
                        yield SseEvents.of([done_event(len(request.text))])
                    else:
                        yield await asyncio.to_thread(whole_file, spoken, request.response_format)


def whole_file(spoken: list[SpokenSentence], response_format: str) -> HttpReply:
    """The sentences' audio as one file (blocking: encoding takes a while for long texts)."""
    rate = spoken[0].rate if spoken else 16_000
    parts = [sentence.samples for sentence in spoken]
    samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return HttpReply(*encode_audio(samples, rate, response_format))
