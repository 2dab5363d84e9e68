"""SentenceSpeechCalculator: sentences spoken by a text-to-speech servable, batch by batch.

    node {
      name: "Speak"
      calculator: "SentenceSpeechCalculator"
      input_stream: "SENTENCES:sentences"
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
servable, options and side packet are T2sCalculator's. The first batch checks the voice even
when it holds no sentence, so an unknown voice fails the request before its answer is sent.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import ClassVar

import numpy as np

from calculators.node_resources import node_servable
from calculators.text_to_speech.resources import build_speech_servable
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from calculators.voice.packets import SentenceBatch, SpokenBatch, SpokenSentence
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.text_to_speech.protocol import SpeechRequest
from servables.text_to_speech.servable import SpeechServable
from servables.text_to_speech.servable import SpokenSentence as SpokenPiece

SENTENCES = "SENTENCES"
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
        cc.outputs.declare(SPEECH, SpokenBatch)
        cc.input_side_packets.declare(RESOURCES, dict)

    def open(self, cc: CalculatorContext) -> None:
        self.servable = node_servable(cc, RESOURCES, SpeechServable, "Text to speech")
        self.checked = False

    async def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[SENTENCES]
        batch: SentenceBatch = packet.payload
        voice = batch.reply.voice if batch.reply is not None else None
        if not self.checked:
            self.servable.voice(voice, param="audio.voice")
            self.checked = True
        spoken = [await self._speak(sentence, voice) for sentence in batch.sentences]
        cc.outputs[SPEECH].add(SpokenBatch(spoken, batch.final), packet.timestamp)

    async def _speak(self, sentence: str, voice: str | None) -> SpokenSentence:
        request = SpeechRequest(self.servable.name, sentence, voice, "wav", 1.0, None, False)
        pieces: list[SpokenPiece] = []
        async with aclosing(self.servable.speak(request)) as items:
            async for item in items:
                if isinstance(item, SpokenPiece):
                    pieces.append(item)
        samples = np.concatenate([p.samples for p in pieces]) if pieces else np.zeros(0, np.float32)
        return SpokenSentence(sentence, samples, pieces[0].rate if pieces else 16_000)
