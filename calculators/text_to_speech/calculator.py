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
as soon as it is spoken and a closing `speech.audio.done`. The answer's `X-Voice` header says
which voice spoke (servables.text_to_speech.servable). WAV is 32-bit float under /v3/, as OVMS
sends it, and 16-bit PCM under OpenAI's /v1/, as OpenAI sends it.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from functools import partial
from typing import ClassVar

import numpy as np

from calculators.http.apis import Api
from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import HttpReply, Reply, SseEvents
from calculators.image_audio.node import ImageAudioCalculator
from calculators.text_to_speech.resources import build_speech_servable
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from graphruntime import register_calculator
from graphruntime.resources import ResourceFactory
from servables.io.audio.codec import Samples, encode_audio
from servables.text_to_speech.protocol import delta_event, done_event, parse_speech
from servables.text_to_speech.servable import VOICE_HEADER, SpeechServable, SpokenSentence

RESOURCES = "TTS_NODE_RESOURCES"


@register_calculator
class T2sCalculator(ImageAudioCalculator):
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
        encode = partial(
            encode_audio, response_format=request.response_format, float_wav=ovms_path(payload)
        )
        headers = {VOICE_HEADER: servable.spoken_voice(request.voice)}
        first = True  # a stream's headers go out with its first step
        spoken: list[SpokenSentence] = []
        async with aclosing(servable.speak(request)) as items:
            async for item in items:
                if isinstance(item, SpokenSentence) and not request.stream:
                    spoken.append(item)
                elif isinstance(item, SpokenSentence):
                    data, _ = await asyncio.to_thread(encode, item.samples, item.rate)
                    event = delta_event(base64.b64encode(data).decode("ascii"))
                    yield SseEvents.of([event], headers=headers if first else {})
                    first = False
                elif request.stream:  # Finished
                    yield SseEvents.of(
                        [done_event(len(request.text))], headers=headers if first else {}
                    )
                else:
                    body, content_type = await asyncio.to_thread(whole_file, spoken, encode)
                    yield HttpReply(body, content_type, headers=headers)


def ovms_path(payload: HttpPayload) -> bool:
    """True under OVMS's /v3/ (WAV as 32-bit float), False under OpenAI's /v1/ (16-bit PCM)."""
    return not payload.path.endswith("/v1/audio/speech")


def whole_file(
    spoken: list[SpokenSentence], encode: Callable[[Samples, int], tuple[bytes, str]]
) -> tuple[bytes, str]:
    """The sentences' audio as one file (blocking: encoding takes a while for long texts)."""
    rate = spoken[0].rate if spoken else 16_000
    parts = [sentence.samples for sentence in spoken]
    samples = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return encode(samples, rate)
