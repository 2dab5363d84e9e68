"""SentenceSpeechCalculator: sentences spoken by a text-to-speech servable, batch by batch.

    node {
      name: "Speak"
      calculator: "SentenceSpeechCalculator"
      input_stream: "SENTENCES:sentences"
      input_stream: "AUDIO_REPLY:audio_reply"   # optional: check the voice at once
      input_side_packet: "TTS_NODE_RESOURCES:speecht5"
      output_stream: "SPEECH:speech"
      node_options: {
        [type.googleapis.com / mediapipe.T2sCalculatorOptions]: {
          models_path: "../speecht5"
          voices: [ { name: "alloy", path: "alloy.bin" } ]
        }
      }
    }

Each SentenceBatch in, one SpokenBatch out at its timestamp: every sentence's samples at the
model's rate, in the voice the batch's AudioReply names (the model's default without one). The
servable, options and side packet are T2sCalculator's. The request is admitted (checked against
the servable's queue bound) and its voice checked once, when AUDIO_REPLY arrives (before the LLM
has written anything: an unknown voice or a full queue fails the request at once), or with the
first batch without it; its sentences are then never refused halfway through the answer.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import ClassVar

import numpy as np

from calculators.node_resources import node_servable
from calculators.text_to_speech.resources import build_speech_servable
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from calculators.voice.packets import SentenceAudio, SentenceBatch, SpokenBatch
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.openai.audio_chat import AudioReply
from servables.text_to_speech.protocol import SpeechRequest
from servables.text_to_speech.servable import SpeechServable, SpokenSentence

SENTENCES = "SENTENCES"
AUDIO_REPLY = "AUDIO_REPLY"
SPEECH = "SPEECH"
RESOURCES = "TTS_NODE_RESOURCES"


@register_calculator
class SentenceSpeechCalculator(Calculator):
    options_type = T2sCalculatorOptions
    blocking = False  # speech runs on the servable's pipeline thread
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_speech_servable}

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(SENTENCES, SentenceBatch)
        cc.inputs.declare(AUDIO_REPLY, object, optional=True)
        cc.outputs.declare(SPEECH, SpokenBatch)
        cc.input_side_packets.declare(RESOURCES, dict)
        if cc.inputs.has_tag(AUDIO_REPLY):  # the reply comes long before the first sentences
            cc.set_input_stream_handler("ImmediateInputStreamHandler")

    def open(self, cc: CalculatorContext) -> None:
        self.servable = node_servable(cc, RESOURCES, SpeechServable, "Text to speech")
        self.admitted = False

    def _admit(self, reply: AudioReply | None) -> None:
        """Once per request: its voice exists and the servable's queue takes it."""
        if not self.admitted:
            self.servable.voice(reply.voice if reply else None, param="audio.voice")
            self.servable.runner.admit()
            self.admitted = True

    async def process(self, cc: CalculatorContext) -> None:
        if cc.inputs.has_tag(AUDIO_REPLY) and not cc.inputs[AUDIO_REPLY].is_empty():
            reply = cc.inputs[AUDIO_REPLY].payload
            if reply is not None:
                self._admit(reply)
        packet = cc.inputs[SENTENCES]
        if packet.is_empty():
            return
        batch: SentenceBatch = packet.payload
        self._admit(batch.reply)
        voice = batch.reply.voice if batch.reply is not None else None
        spoken = [await self._speak(sentence, voice) for sentence in batch.sentences]
        speaker = self.servable.spoken_voice(voice)
        cc.outputs[SPEECH].add(SpokenBatch(spoken, batch.final, speaker), packet.timestamp)

    async def _speak(self, sentence: str, voice: str | None) -> SentenceAudio:
        request = SpeechRequest(
            model=self.servable.name,
            text=sentence,
            voice=voice,
            response_format="wav",
            speed=1.0,
            language=None,
            stream=False,
        )
        pieces: list[SpokenSentence] = []
        async with aclosing(self.servable.speak(request, admitted=True)) as items:
            async for item in items:
                if isinstance(item, SpokenSentence):
                    pieces.append(item)
        if not pieces:
            return SentenceAudio(sentence, np.zeros(0, np.float32), 0)
        return SentenceAudio(sentence, np.concatenate([p.samples for p in pieces]), pieces[0].rate)
