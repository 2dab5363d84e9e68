"""ChatAudioReplyCalculator: an LLM node's answer and its speech, as OpenAI's audio chat answer.

    node {
      name: "Reply"
      calculator: "ChatAudioReplyCalculator"
      input_stream: "CHUNK:answer"              # the LLM node's HTTP_RESPONSE_PAYLOAD
      input_stream: "SPEECH:speech"             # SpokenBatches of the answer's sentences
      input_stream: "AUDIO_REPLY:audio_reply"   # how to speak it, or None: a text answer
      output_stream: "HTTP_RESPONSE_PAYLOAD:output"
      input_stream_handler { input_stream_handler: "ImmediateInputStreamHandler" }
    }

A text answer (AUDIO_REPLY None) passes through as the LLM node sent it. A spoken one:

* streaming: the LLM's frames go out as they come (text deltas as generated), and each spoken
  sentence as a chunk of its own, `delta.audio` {id, data, transcript} (data: that sentence in
  the asked format; `pcm16` chunks concatenate into one stream), as soon as it is spoken; the
  LLM's `[DONE]` is held back until the last sentence has gone out;
* unary: the LLM's body once every sentence is spoken, with OpenAI's `message.audio` {id, data
  (the whole answer), transcript, expires_at} (the text stays in `content`).

Nothing goes out before the speech node has taken the first batch (it checks the voice then),
so an unknown voice is an ordinary 400. The output's timestamps are this node's own count: the
two inputs interleave as they come (the Immediate handler), and packets must leave in order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calculators.voice.packets import SSE_DONE, ChatChunk, SpokenBatch
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.audio.codec import encode_audio
from servables.openai.audio_chat import (
    AudioReply,
    answer_audio,
    audio_chunk,
    closing_chunks,
)
from servables.openai.responses import dumps, sse_frame

CHUNK = "CHUNK"
SPEECH = "SPEECH"
AUDIO_REPLY = "AUDIO_REPLY"
RESPONSE = "HTTP_RESPONSE_PAYLOAD"
_UNKNOWN = object()


@register_calculator
class ChatAudioReplyCalculator(Calculator):
    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(CHUNK, object)
        cc.inputs.declare(SPEECH, SpokenBatch)
        cc.inputs.declare(AUDIO_REPLY, object)
        cc.outputs.declare(RESPONSE, object)
        cc.set_input_stream_handler("ImmediateInputStreamHandler")

    def open(self, cc: CalculatorContext) -> None:
        self.reply: Any = _UNKNOWN
        self.waiting: list[bytes] = []  # text frames held until the voice is known to be good
        self.spoken = False  # the speech node has taken its first batch
        self.text_done = self.speech_done = False
        self.body: dict[str, Any] | None = None  # a unary answer, until it is spoken
        self.envelope: dict[str, Any] = {}  # the stream's id, created, model
        self.closing: list[dict[str, Any]] = []  # the finish and usage chunks
        self.samples: list[Any] = []
        self.rate = 16_000
        self.timestamp = 0

    def _emit(self, cc: CalculatorContext, payload: Any) -> None:
        cc.outputs[RESPONSE].add(payload, self.timestamp)
        self.timestamp += 1

    def process(self, cc: CalculatorContext) -> None:
        if not cc.inputs[AUDIO_REPLY].is_empty():
            self.reply = cc.inputs[AUDIO_REPLY].payload
            held, self.waiting = self.waiting, []
            for chunk in held:
                self._chunk(cc, chunk)
        if not cc.inputs[CHUNK].is_empty():
            self._chunk(cc, cc.inputs[CHUNK].payload)
        if not cc.inputs[SPEECH].is_empty():
            self._speech(cc, cc.inputs[SPEECH].payload)

    def _chunk(self, cc: CalculatorContext, payload: Any) -> None:
        if self.reply is _UNKNOWN:
            self.waiting.append(payload)
        elif self.reply is None:
            self._emit(cc, payload)  # a text answer: as the LLM node sent it
        else:
            self._answer_chunk(cc, payload, self.reply)

    def _answer_chunk(self, cc: CalculatorContext, payload: Any, reply: AudioReply) -> None:
        chunk = ChatChunk.read(payload)
        if chunk.body is not None:
            self.body = chunk.body
            self.text_done = True
        else:
            for event in chunk.events:
                if not self.envelope and "id" in event:
                    self.envelope = {k: event[k] for k in ("id", "created", "model") if k in event}
                    if "usage" in event:  # asked for: every chunk but the last says null
                        self.envelope["usage"] = None
            now, closing = closing_chunks(chunk.events)
            self.closing += closing  # with [DONE], after the last sentence's audio
            frames = b"".join(map(sse_frame, now))
            if frames:
                if self.spoken:
                    self._emit(cc, frames)
                else:
                    self.waiting.append(frames)
            self.text_done = self.text_done or chunk.done
        self._finish(cc, reply)

    def _speech(self, cc: CalculatorContext, batch: SpokenBatch) -> None:
        reply = self.reply
        assert isinstance(reply, AudioReply), "speech for a request that asked for none"
        if not self.spoken:
            self.spoken = True
            held, self.waiting = self.waiting, []
            for frames in held:
                self._emit(cc, frames)
        for index, sentence in enumerate(batch.sentences):
            self.rate = sentence.rate
            if reply.stream:
                data, _ = encode_audio(sentence.samples, sentence.rate, reply.format)
                last = batch.final and index == len(batch.sentences) - 1
                self._emit(
                    cc, sse_frame(audio_chunk(self.envelope, reply, data, sentence.text, last))
                )
            else:
                self.samples.append(sentence.samples)
        if reply.stream and batch.final and not batch.sentences:  # the audio's expires_at
            self._emit(cc, sse_frame(audio_chunk(self.envelope, reply, b"", "", last=True)))
        self.speech_done = batch.final
        self._finish(cc, reply)

    def _finish(self, cc: CalculatorContext, reply: AudioReply) -> None:
        if not (self.text_done and self.speech_done):
            return
        if reply.stream:
            self._emit(cc, b"".join(map(sse_frame, self.closing)) + SSE_DONE + b"\n\n")
            return
        assert self.body is not None
        samples = np.concatenate(self.samples) if self.samples else np.zeros(0, np.float32)
        data, _ = encode_audio(samples, self.rate, reply.format)
        choices = self.body.get("choices") or [{}]
        message = choices[0].setdefault("message", {})
        transcript = message.get("content") or ""
        message["audio"] = answer_audio(reply, data, transcript)
        self._emit(cc, dumps(self.body).encode())
        self.text_done = False  # answered: nothing more
