"""SentenceSplitterCalculator: an LLM node's answer, as sentences, as soon as each is complete.

    node {
      name: "Sentences"
      calculator: "SentenceSplitterCalculator"
      input_stream: "CHUNK:answer"              # an LLM node's HTTP_RESPONSE_PAYLOAD
      input_stream: "AUDIO_REPLY:audio_reply"   # optional: split only for a spoken answer
      output_stream: "SENTENCES:sentences"
    }

Reads the chunks a chat LLM node sends its client (SSE frames as it generates, or one JSON
body) and emits, for each, a SentenceBatch of the sentences that chunk completed (often none),
the last one marked `final` with the rest of the text: what a text-to-speech node needs to start
speaking the first sentence while the LLM writes the next. With AUDIO_REPLY, a request that
asks for a text answer (None there) gets no batches at all; without it, every answer is split.
"""

from __future__ import annotations

from calculators.llm.answer import ChatChunk
from calculators.voice.packets import SentenceBatch
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.io.text.sentences import SentenceBuffer
from servables.openai.audio_chat import AudioReply

CHUNK = "CHUNK"
AUDIO_REPLY = "AUDIO_REPLY"
SENTENCES = "SENTENCES"


@register_calculator
class SentenceSplitterCalculator(Calculator):
    blocking = False  # cheap: inline on the scheduler

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(CHUNK, object)
        cc.inputs.declare(AUDIO_REPLY, object, optional=True)
        cc.outputs.declare(SENTENCES, SentenceBatch)

    def open(self, cc: CalculatorContext) -> None:
        self.buffer = SentenceBuffer()
        self.reply: AudioReply | None = None
        # Without AUDIO_REPLY every answer is spoken; with it, only the asked-for ones.
        self.speaks = not cc.inputs.has_tag(AUDIO_REPLY)

    def process(self, cc: CalculatorContext) -> None:
        if cc.inputs.has_tag(AUDIO_REPLY) and not cc.inputs[AUDIO_REPLY].is_empty():
            self.reply = cc.inputs[AUDIO_REPLY].payload
            self.speaks = self.reply is not None
        packet = cc.inputs[CHUNK]
        if packet.is_empty() or not self.speaks:
            return
        chunk = ChatChunk.read(packet.payload)
        sentences = self.buffer.feed(chunk.text())
        final = chunk.done or chunk.failed
        if chunk.failed:  # the answer broke off: what it left half said is not spoken
            sentences, _ = [], self.buffer.flush()
        elif final:
            sentences += self.buffer.flush()
        cc.outputs[SENTENCES].add(SentenceBatch(sentences, final, self.reply), packet.timestamp)
