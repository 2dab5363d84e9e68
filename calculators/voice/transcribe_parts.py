"""ChatTranscriptionCalculator: a chat request's spoken messages heard, as text.

    node {
      name: "Listen"
      calculator: "ChatTranscriptionCalculator"
      input_stream: "HTTP_REQUEST_PAYLOAD:input"
      input_side_packet: "STT_NODE_RESOURCES:whisper"
      output_stream: "HTTP_REQUEST_PAYLOAD:text_request"
      output_stream: "AUDIO_REPLY:audio_reply"
      node_options: {
        [type.googleapis.com / mediapipe.S2tCalculatorOptions]: { models_path: "../whisper" }
      }
    }

Each `input_audio` part of a chat request is transcribed by the speech-to-text servable (the
same servable, options and side packet as S2tCalculator's) and replaced by a text part with its
transcript; `modalities` and `audio` are taken out, so an unchanged LLM node downstream reads a
plain text chat. AUDIO_REPLY (optional) carries how the answer is to be spoken (an AudioReply),
or None for a text answer, once, at the request's timestamp; then that stream closes, so nodes
that read it beside the LLM's stream never wait for it again (so the node takes one request per
graph run, as every HTTP graph runs per request). Any other request (text chat, completions,
tokenize) passes through untouched.
"""

from __future__ import annotations

import dataclasses
import json
from contextlib import aclosing
from typing import ClassVar

from calculators.http.apis import Api, api_of
from calculators.http.payload import REQUEST, HttpPayload, request_body
from calculators.node_resources import node_servable
from calculators.speech_to_text.resources import build_transcription_servable
from calculators.speech_to_text.s2t_calculator_pb2 import S2tCalculatorOptions
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest
from servables.io.request_fields import UploadedFile
from servables.openai.audio_chat import (
    AudioPart,
    AudioReply,
    audio_parts,
    audio_reply,
    refuse_audio_ids,
    text_request,
)
from servables.runtime.thread_runner import Finished
from servables.speech_to_text.protocol import TranscriptionRequest
from servables.speech_to_text.servable import TranscriptionServable

AUDIO_REPLY = "AUDIO_REPLY"
RESOURCES = "STT_NODE_RESOURCES"


@register_calculator
class ChatTranscriptionCalculator(Calculator):
    options_type = S2tCalculatorOptions
    blocking = False  # transcription runs on the servable's pipeline thread
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {
        RESOURCES: build_transcription_servable
    }

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(AUDIO_REPLY, object, optional=True)
        cc.input_side_packets.declare(RESOURCES, dict)

    def open(self, cc: CalculatorContext) -> None:
        self.servable = node_servable(cc, RESOURCES, TranscriptionServable, "Speech to text")
        self.answered = False

    async def process(self, cc: CalculatorContext) -> None:
        if self.answered:  # AUDIO_REPLY closed after the first: one request per run
            raise ValueError(
                "ChatTranscriptionCalculator takes one request per graph run (as every HTTP "
                "graph runs per request)"
            )
        self.answered = True
        packet = cc.inputs[REQUEST]
        payload: HttpPayload = packet.payload
        reply: AudioReply | None = None
        if api_of(payload.uri) is Api.CHAT:
            body = request_body(payload)
            if isinstance(body, dict):
                refuse_audio_ids(body)
                reply = audio_reply(body)
                parts = audio_parts(body)
                if parts or "modalities" in body or "audio" in body:
                    transcripts = [await self._hear(part) for part in parts]
                    rewritten = text_request(body, parts, transcripts)
                    payload = dataclasses.replace(
                        payload, parsed_json=rewritten, body=json.dumps(rewritten).encode()
                    )
        if cc.outputs.has_tag(AUDIO_REPLY):
            cc.outputs[AUDIO_REPLY].add(reply, packet.timestamp)
            cc.outputs[AUDIO_REPLY].close()
        cc.outputs[REQUEST].add(payload, packet.timestamp)

    async def _hear(self, part: AudioPart) -> str:
        """One part's transcript (its errors name the part, not a form field)."""
        audio = UploadedFile(f"audio.{part.format}", f"audio/{part.format}", part.data)
        request = TranscriptionRequest(self.servable.name, audio, translate=False)
        try:
            async with aclosing(await self.servable.transcribe(request)) as items:
                async for item in items:
                    if isinstance(item, Finished):
                        return item.result.text.strip()
        except InvalidRequest as error:
            message = error.message.removeprefix("file: ")
            raise InvalidRequest(f"{part.param}: {message}", param=part.param) from error
        raise AssertionError("a transcription ends with its transcript")  # pragma: no cover
