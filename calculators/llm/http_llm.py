"""HttpLLMCalculator: OpenAI chat/completions over an LLM servable, one chunk per LOOPBACK cycle.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"
    node: {
      name: "LLMExecutor"
      calculator: "HttpLLMCalculator"
      input_stream: "LOOPBACK:loopback"
      input_stream: "HTTP_REQUEST_PAYLOAD:input"
      input_side_packet: "LLM_NODE_RESOURCES:llm"
      output_stream: "LOOPBACK:loopback"
      output_stream: "HTTP_RESPONSE_PAYLOAD:output"
      input_stream_info: { tag_index: 'LOOPBACK:0', back_edge: true }
      node_options: { [type.googleapis.com/mediapipe.LLMCalculatorOptions]: { models_path: "./" } }
      input_stream_handler {
        input_stream_handler: "SyncSetInputStreamHandler",
        options {
          [mediapipe.SyncSetInputStreamHandlerOptions.ext] { sync_set { tag_index: "LOOPBACK:0" } }
        }
      }
    }

As in OVMS: the request packet starts a generation; a unary request answers with one JSON body;
a streaming request emits the SSE events of one engine step per process() call together with a
LOOPBACK packet, which the back edge brings back (in its own sync set) to trigger the next call
(calculators.http.streaming runs that cycle). The last call emits the final events (and
`data: [DONE]`, except on a Responses stream, which ends with its last event) and no LOOPBACK,
which ends the cycle.
Once streaming has started, an engine error becomes one `data: {"error": ...}` frame and `[DONE]`
(a Responses stream: `response.failed`, and no `[DONE]`); an error of the graph's own ends the
stream the same way at the HTTP route (graphrt/http/stream_endings.py).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import ClassVar

from calculators.http.apis import Api, expect_api
from calculators.http.payload import HttpPayload, request_body
from calculators.http.replies import DONE, JsonReply, Reply, SseEvent, SseEvents
from calculators.http.services import MEDIA_POLICY
from calculators.http.streaming import HttpStreamCalculator
from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from calculators.llm.resources import build_llm_servable
from calculators.node_resources import node_servable
from graphruntime import CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import ServableError
from servables.llm.request import Endpoint
from servables.llm.servable import LLMServable
from servables.openai.generation_answer import (
    RESPONSE_ENDS,
    GenerationAnswer,
    StreamStep,
    generation_answer,
)
from servables.openai.tokenize import tokenize_reply

logger = logging.getLogger(__name__)

RESOURCES = "LLM_NODE_RESOURCES"
EXECUTION_CONTEXTS = "LLM_NODE_EXECUTION_CONTEXTS"
APIS = (Api.CHAT, Api.COMPLETIONS, Api.RESPONSES, Api.TOKENIZE)
# The protocol's endpoint of each generative API (None: the Responses API).
ENDPOINTS: dict[Api, Endpoint | None] = {
    Api.CHAT: "chat",
    Api.COMPLETIONS: "completions",
    Api.RESPONSES: None,
}


@register_calculator
class HttpLLMCalculator(HttpStreamCalculator):
    options_type = LLMCalculatorOptions
    loopback_required = True
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_llm_servable}

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cls.declare_http_streams(cc)
        cc.input_side_packets.declare(RESOURCES, dict)
        cc.input_side_packets.declare(EXECUTION_CONTEXTS, optional=True)
        cc.use_service(MEDIA_POLICY, optional=True)
        if cc.options(LLMCalculatorOptions) is None:
            raise ValueError("node_options must carry mediapipe.LLMCalculatorOptions")

    def open(self, cc: CalculatorContext) -> None:
        super().open(cc)
        self.servable = node_servable(cc, RESOURCES, LLMServable, "LLM")
        self.media = cc.service(MEDIA_POLICY) if cc.has_service(MEDIA_POLICY) else None

    def is_last(self, reply: Reply) -> bool:
        events = reply.events if isinstance(reply, SseEvents) else ()
        return (bool(events) and events[-1].event in RESPONSE_ENDS) or super().is_last(reply)

    async def replies(self, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        api = expect_api(payload.uri, "an LLM", *APIS)
        body = request_body(payload)
        if api is Api.TOKENIZE:
            servable = self.servable
            yield JsonReply(await tokenize_reply(servable.tokenize, body, servable.max_length))
            return
        limits, count = self.servable.limits, self._count_tokens
        answer = generation_answer(body, ENDPOINTS[api], limits, count)
        async with aclosing(self.servable.generate(answer.request, self.media)) as events:
            if not answer.request.stream:
                yield JsonReply(await answer.unary(events))
                return
            if answer.names_events:
                # The request is taken: say so now, not after the first engine step.
                yield _events(answer, answer.start())
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    if step := _events(answer, answer.exhausted()):
                        yield step
                    return
                except ServableError as error:
                    if self.timestamp == 0:
                        raise  # nothing sent yet: the server answers with a proper error status
                    yield _events(answer, answer.failure(error))
                    return
                yield _events(answer, answer.step(event))

    def _count_tokens(self, text: str) -> int:
        """Tokens of `text` by the model's tokenizer (the reasoning part of the output)."""
        if not text:
            return 0
        try:
            encoded = self.servable.tokenizer.encode(text, add_special_tokens=False)
            return int(encoded.input_ids.get_shape()[-1])
        except Exception:  # no tokenizer (not loaded): usage still answers, without the detail
            logger.debug("could not count reasoning tokens", exc_info=True)
            return 0


def _events(answer: GenerationAnswer, step: StreamStep) -> SseEvents:
    """A protocol step as SSE events (Responses events named by their type)."""
    if answer.names_events:
        events = tuple(SseEvent(event, event=str(event["type"])) for event in step.events)
    else:
        events = tuple(SseEvent(event) for event in step.events)
    return SseEvents((*events, DONE) if step.done else events)
