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
from collections.abc import AsyncGenerator, AsyncIterator
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
from servables.errors import InvalidRequest, ServableError, readable_message
from servables.llm.choices import GenerationEvent
from servables.llm.output_parsers import ParsedDelta, ToolCall
from servables.llm.output_parsers.base import assemble
from servables.llm.servable import LLMServable
from servables.openai.protocol import Endpoint, GenerationRequest, parse_request
from servables.openai.responses import (
    Choice,
    ResponseBuilder,
    TokenLogprob,
    error_body,
)
from servables.openai.responses_api import (
    ResponseEnvelope,
    ResponsesStream,
    parse_responses_request,
    response_object,
    unary_output,
)
from servables.openai.tokenize import tokenize_reply

logger = logging.getLogger(__name__)

RESOURCES = "LLM_NODE_RESOURCES"
EXECUTION_CONTEXTS = "LLM_NODE_EXECUTION_CONTEXTS"
APIS = (Api.CHAT, Api.COMPLETIONS, Api.RESPONSES, Api.TOKENIZE)
# Events that end a Response: its stream has no [DONE].
_RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def _response_event(event: dict[str, object]) -> SseEvent:
    """A Responses event: OpenAI names it on an `event:` line and repeats it in the data."""
    return SseEvent(event, event=str(event["type"]))


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
        if isinstance(reply, SseEvents) and reply.events:
            last = reply.events[-1]
            if last.event in _RESPONSE_ENDS:
                return True
        return super().is_last(reply)

    async def replies(self, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        api = expect_api(payload.uri, "an LLM", *APIS)
        if api is Api.TOKENIZE:
            body = request_body(payload)
            yield JsonReply(
                await tokenize_reply(self.servable.tokenize, body, self.servable.max_length)
            )
            return
        responses: ResponsesStream | None = None
        envelope: ResponseEnvelope | None = None
        if api is Api.RESPONSES:
            parsed = parse_responses_request(request_body(payload), self.servable.limits)
            request = parsed.generation
            request.ignored_fields = parsed.ignored_fields
            envelope = ResponseEnvelope(request.model, parsed.echo)
            if request.stream:
                responses = ResponsesStream(envelope, self._count_tokens)
            endpoint: Endpoint = "chat"
        else:
            endpoint = "chat" if api is Api.CHAT else "completions"
            request = parse_request(request_body(payload), endpoint, self.servable.limits)
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        builder = ResponseBuilder(
            endpoint,
            request.model,
            include_usage=request.include_usage,
            top_logprobs=request.sampling.top_logprobs,
        )
        async with aclosing(self.servable.generate(request, self.media)) as events:
            if not request.stream:
                yield JsonReply(await self._unary(events, request, builder, envelope))
                return
            stream = _Stream(builder, responses)
            if responses is not None:
                # The request is taken: say so now, not after the first engine step.
                yield SseEvents(tuple(map(_response_event, responses.start())))
            while True:
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    if responses is None:  # a Responses stream ends with its last event
                        yield SseEvents((DONE,))
                    return
                except ServableError as error:
                    if self.timestamp == 0:
                        raise  # nothing sent yet: the server answers with a proper error status
                    yield stream.failure(error)
                    return
                yield stream.step(event)

    async def _unary(
        self,
        events: AsyncIterator[GenerationEvent],
        request: GenerationRequest,
        builder: ResponseBuilder,
        envelope: ResponseEnvelope | None,
    ) -> dict[str, object]:
        parts: dict[int, list[ParsedDelta]] = {}
        logprobs: dict[int, list[TokenLogprob]] = {}
        reasons: dict[int, str] = {}
        prefix = ""
        prefix_scored = False
        usage = None
        verbose = None
        async for event in events:
            verbose = event.verbose or verbose
            for update in event.updates:
                prefix = prefix or update.prefix
                prefix_scored = prefix_scored or update.prefix_scored
                parts.setdefault(update.index, []).append(
                    ParsedDelta(update.text, update.reasoning, update.tool_calls)
                )
                if update.logprobs:
                    logprobs.setdefault(update.index, []).extend(update.logprobs)
                if update.finish_reason:
                    reasons[update.index] = update.finish_reason
            usage = event.usage or usage
        assert usage is not None
        if envelope is not None:  # Responses API: one choice, as output items
            parsed = assemble(parts.get(0, []))
            incomplete = reasons.get(0) == "length"
            return response_object(
                envelope,
                "incomplete" if incomplete else "completed",
                unary_output(parsed, incomplete),
                usage,
                incomplete=incomplete,
                reasoning_tokens=self._count_tokens(parsed.reasoning or ""),
            )
        choices = []
        for index in range(request.sampling.n):
            parsed = assemble(parts.get(index, []))
            calls: list[ToolCall] = parsed.tool_calls
            choices.append(
                Choice(
                    index,
                    # OpenAI: content is null only when the reply is tool calls alone.
                    parsed.content if parsed.content is not None or calls else "",
                    reasons.get(index, "stop"),
                    logprobs.get(index, []) if request.sampling.logprobs else None,
                    parsed.reasoning,
                    calls,
                )
            )
        body = builder.unary(choices, usage, prefix, prefix_scored)
        if verbose is not None:
            body["__verbose"] = verbose
        return body

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


class _Stream:
    """The events of one streamed generation, step by step: chat/completions chunks, or the
    Responses API's events."""

    def __init__(self, builder: ResponseBuilder, responses: ResponsesStream | None) -> None:
        self.builder = builder
        self.responses = responses
        self.announced: set[int] = set()

    def failure(self, error: ServableError) -> SseEvents:
        """How the stream ends when the engine fails after it started: chat/completions' error
        frame and [DONE], or `response.failed`."""
        message = readable_message(error.message)
        invalid = isinstance(error, InvalidRequest)
        if self.responses is not None:
            failed = self.responses.fail(message, "invalid_prompt" if invalid else "server_error")
            return SseEvents(tuple(map(_response_event, failed)))
        kind = "invalid_request_error" if invalid else "server_error"
        return SseEvents((SseEvent(error_body(message, kind, error.param)), DONE))

    def step(self, event: GenerationEvent) -> SseEvents:
        if self.responses is not None:
            return self._responses_step(event, self.responses)
        builder = self.builder
        events: list[SseEvent] = []
        # OVMS puts `__verbose` on the final chunk: the last one that finishes a choice.
        last_finish = max((i for i, u in enumerate(event.updates) if u.finish_reason), default=None)
        for position, update in enumerate(event.updates):
            if builder.endpoint == "chat" and update.index not in self.announced:
                self.announced.add(update.index)
                events.append(SseEvent(builder.role_chunk(update.index)))
            if (
                update.text
                or update.prefix
                or update.finish_reason
                or update.logprobs
                or update.reasoning
                or update.tool_calls
            ):
                chunk = builder.delta_chunk(
                    update.index,
                    update.text,
                    update.logprobs,
                    update.finish_reason,
                    prefix=update.prefix,
                    prefix_scored=update.prefix_scored,
                    reasoning=update.reasoning,
                    tool_calls=update.tool_calls,
                )
                if event.verbose is not None and position == last_finish:
                    chunk["__verbose"] = event.verbose
                events.append(SseEvent(chunk))
        if event.usage is not None:
            if builder.include_usage:
                events.append(SseEvent(builder.usage_chunk(event.usage)))
            events.append(DONE)
        return SseEvents(tuple(events))

    @staticmethod
    def _responses_step(event: GenerationEvent, stream: ResponsesStream) -> SseEvents:
        events = stream.start()  # already sent when the request was taken: nothing
        for update in event.updates:
            events += stream.update(update.text, update.reasoning, update.tool_calls)
        if event.usage is not None:
            reason = next((u.finish_reason for u in event.updates if u.finish_reason), "stop")
            events += stream.finish(reason or "stop", event.usage)
        return SseEvents(tuple(map(_response_event, events)))
