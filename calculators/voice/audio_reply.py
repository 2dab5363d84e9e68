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
  the asked format, `pcm16` chunks concatenating into one stream; the transcripts concatenate
  into the text, white space included), as soon as it is spoken; the chunks that end the LLM's
  stream (its finish_reason, usage, an error frame, `[DONE]`) are held back until the last
  sentence has gone out, so the stream still ends as OpenAI's do;
* unary: the LLM's body once every sentence is spoken, with OpenAI's `message.audio` {id, data
  (the whole answer), transcript, expires_at} (the text stays in `content`; `audio` is null
  when there was nothing to speak: a tool call, an empty answer).

Nothing goes out before the speech node has taken the first batch (it checks the voice then, if
AUDIO_REPLY did not reach it before), so an unknown voice is an ordinary 400, and the first
packet out carries the `X-Voice` header naming who spoke (the speech servable's rule: a model
without named voices speaks every voice in its default speaker). The output's timestamps are
this node's own count: the inputs interleave as they come (the Immediate handler), and packets
must leave in order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from calculators.http.payload import RESPONSE
from calculators.http.replies import JsonReply, SseEvents
from calculators.llm.answer import ChatChunk
from calculators.voice.packets import SpokenBatch
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.io.audio.codec import encode_audio
from servables.openai.audio_chat import AudioReply, answer_audio, audio_chunk, closing_chunks
from servables.text_to_speech.servable import VOICE_HEADER

CHUNK = "CHUNK"
SPEECH = "SPEECH"
AUDIO_REPLY = "AUDIO_REPLY"
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
        self.early: list[Any] = []  # LLM packets that came before AUDIO_REPLY
        self.held: list[SseEvents] = []  # text events until the speech node took a batch
        self.closing: list[dict[str, Any]] = []  # what ends the stream: after the speech
        self.spoken = False  # the speech node has taken its first batch
        self.text_done = self.speech_done = self.answered = self.failed = False
        self.body: dict[str, Any] | None = None  # a unary answer, until it is spoken
        self.envelope: dict[str, Any] = {}  # the stream's id, created, model
        self.samples: list[Any] = []
        self.rate = 0
        self.text = ""  # the answer's text so far (a stream)
        self.said = 0  # where the last spoken sentence ended in it
        self.headers: dict[str, str] = {}  # for the first packet out, once the voice is known
        self.timestamp = 0

    def _emit(self, cc: CalculatorContext, payload: Any) -> None:
        if self.headers and isinstance(payload, JsonReply | SseEvents):
            payload = replace(payload, headers=self.headers)
            self.headers = {}  # only the response's first packet has headers
        cc.outputs[RESPONSE].add(payload, self.timestamp)
        self.timestamp += 1

    def process(self, cc: CalculatorContext) -> None:
        if not cc.inputs[AUDIO_REPLY].is_empty():
            self.reply = cc.inputs[AUDIO_REPLY].payload
            early, self.early = self.early, []
            for payload in early:
                self._chunk(cc, payload)
        if not cc.inputs[CHUNK].is_empty():
            self._chunk(cc, cc.inputs[CHUNK].payload)
        if not cc.inputs[SPEECH].is_empty() and isinstance(self.reply, AudioReply):
            self._speech(cc, cc.inputs[SPEECH].payload, self.reply)
            # (a text answer's speech, from a splitter that splits every answer, is dropped)

    def _chunk(self, cc: CalculatorContext, payload: Any) -> None:
        if self.reply is _UNKNOWN:
            self.early.append(payload)
        elif self.reply is None:
            self._emit(cc, payload)  # a text answer: as the LLM node sent it
        else:
            self._answer_chunk(cc, payload, self.reply)

    def _answer_chunk(self, cc: CalculatorContext, payload: Any, reply: AudioReply) -> None:
        """The LLM's text: a unary body kept until spoken; stream frames sent (or held until
        the voice is known good), their end kept for after the speech."""
        chunk = ChatChunk.read(payload)
        if chunk.body is not None:
            self.body = chunk.body
        else:
            for event in chunk.events:
                if not self.envelope and "id" in event:
                    self.envelope = {k: event[k] for k in ("id", "created", "model") if k in event}
                    if "usage" in event:  # asked for: every chunk but the last says null
                        self.envelope["usage"] = None
            self.text += chunk.text()
            now, ending = closing_chunks(chunk.events)
            self.closing += ending
            self.failed = self.failed or chunk.failed
            if now and self.spoken:
                self._emit(cc, SseEvents.of(now))
            elif now:
                self.held.append(SseEvents.of(now))
        self.text_done = self.text_done or chunk.done
        self._finish(cc, reply)

    def _speech(self, cc: CalculatorContext, batch: SpokenBatch, reply: AudioReply) -> None:
        """Spoken sentences: sent at once (a stream) or kept (unary)."""
        if not self.spoken:
            self.spoken = True
            self.headers = {VOICE_HEADER: batch.voice}
            held, self.held = self.held, []
            for events in held:
                self._emit(cc, events)
        for index, sentence in enumerate(batch.sentences):
            if not sentence.samples.size:
                continue
            self.rate = sentence.rate
            if not reply.stream:
                self.samples.append(sentence.samples)
                continue
            data, _ = encode_audio(sentence.samples, sentence.rate, reply.format)
            last = batch.final and index == len(batch.sentences) - 1
            text = self._transcript(sentence.text)
            self._emit(cc, SseEvents.of([audio_chunk(self.envelope, reply, data, text, last)]))
        last_sent = batch.sentences and batch.sentences[-1].samples.size
        if reply.stream and batch.final and not last_sent and not self.failed:
            # The final batch said nothing more: the audio's expires_at goes out on its own.
            self._emit(cc, SseEvents.of([audio_chunk(self.envelope, reply, b"", "", last=True)]))
        self.speech_done = batch.final
        self._finish(cc, reply)

    def _transcript(self, sentence: str) -> str:
        """The answer's text up to the end of `sentence`, from where the last one ended: the
        transcripts add up to the text, white space between sentences included."""
        end = self.text.find(sentence, self.said)
        if end < 0:  # not found as written (cannot happen with the splitter's sentences)
            return sentence if not self.said else " " + sentence
        start, self.said = self.said, end + len(sentence)
        return self.text[start : self.said]

    def _finish(self, cc: CalculatorContext, reply: AudioReply) -> None:
        """Once both the text and its speech have ended: the stream's end, or the answer."""
        if self.answered or not (self.text_done and self.speech_done):
            return
        self.answered = True
        if reply.stream:
            self._emit(cc, SseEvents.of(self.closing, done=True))
            return
        assert self.body is not None
        # A new body: the LLM's reply is a packet other nodes may read too.
        first, *others = self.body.get("choices") or [{}]
        message = dict(first.get("message") or {})
        transcript = message.get("content") or ""
        message["audio"] = None
        if self.samples and transcript:
            data, _ = encode_audio(np.concatenate(self.samples), self.rate, reply.format)
            message["audio"] = answer_audio(reply, data, transcript)
        choices = [{**first, "message": message}, *others]
        self._emit(cc, JsonReply({**self.body, "choices": choices}))
