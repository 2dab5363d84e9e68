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
a streaming request emits the SSE frames of one engine step per process() call together with a
LOOPBACK packet, which the back edge brings back (in its own sync set) to trigger the next call.
The last call emits the final frames (and `data: [DONE]`, except on a Responses stream, which ends
with its last event) and no LOOPBACK, which ends the cycle.
Once streaming has started, an engine error becomes one `data: {"error": ...}` frame and `[DONE]`
(a Responses stream: `response.failed`, and no `[DONE]`); an error of the graph's own ends the
stream the same way at the HTTP route (servables.openai.stream_failure).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar, Literal

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from calculators.llm.media import MEDIA_POLICY
from calculators.llm.payload import HttpPayload
from calculators.llm.resources import build_llm_servable
from calculators.node_resources import node_servable
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime._proto.stream_handler_options_pb2 import SyncSetInputStreamHandlerOptions
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest, ServableError, readable_message
from servables.llm.choices import GenerationEvent
from servables.llm.output_parsers import ParsedDelta, ToolCall
from servables.llm.output_parsers.base import assemble
from servables.llm.servable import LLMServable
from servables.openai.protocol import Endpoint, GenerationRequest, parse_request
from servables.openai.responses import (
    SSE_DONE,
    Choice,
    ResponseBuilder,
    TokenLogprob,
    dumps,
    error_body,
    sse_frame,
)
from servables.openai.responses_api import (
    ResponseEnvelope,
    ResponsesStream,
    parse_responses_request,
    response_object,
    sse_event,
    unary_output,
)
from servables.openai.tokenize import tokenize_reply

logger = logging.getLogger(__name__)

REQUEST = "HTTP_REQUEST_PAYLOAD"
RESPONSE = "HTTP_RESPONSE_PAYLOAD"
LOOPBACK = "LOOPBACK"
RESOURCES = "LLM_NODE_RESOURCES"
EXECUTION_CONTEXTS = "LLM_NODE_EXECUTION_CONTEXTS"


Route = Literal["chat", "completions", "responses", "tokenize"]


def route_of(uri: str) -> Route:
    """What the request asks for, from its URI (OVMS's HttpLLMCalculator dispatches the same)."""
    path = uri.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return "chat"
    if path.endswith("/completions"):
        return "completions"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/tokenize"):
        return "tokenize"
    raise InvalidRequest(
        "Wrong endpoint. Allowed endpoints: /v3/chat/completions, /v3/completions, "
        "/v3/responses, /v3/tokenize (also under /v1/)"
    )


def endpoint_of(uri: str) -> Endpoint:
    route = route_of(uri)
    if route not in ("chat", "completions"):
        raise InvalidRequest(f"{uri} is not a chat/completions endpoint")
    return route


def request_body(payload: HttpPayload) -> Any:
    if payload.parsed_json is not None:
        return payload.parsed_json
    try:
        return json.loads(payload.body)
    except ValueError as error:
        raise InvalidRequest(f"The request body is not valid JSON: {error}") from error


def _sync_set_options() -> SyncSetInputStreamHandlerOptions:
    options = SyncSetInputStreamHandlerOptions()
    options.sync_set.add().tag_index.append("LOOPBACK:0")
    return options


@register_calculator
class HttpLLMCalculator(Calculator):
    options_type = LLMCalculatorOptions
    blocking = False  # open() is cheap; process() is async
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_llm_servable}

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.inputs.declare(LOOPBACK, bool)
        cc.outputs.declare(RESPONSE, bytes)
        cc.outputs.declare(LOOPBACK, bool)
        cc.input_side_packets.declare(RESOURCES, dict)
        cc.input_side_packets.declare(EXECUTION_CONTEXTS, optional=True)
        cc.use_service(MEDIA_POLICY, optional=True)
        # OVMS graphs name this handler themselves; this default keeps graphs that forget it alive.
        cc.set_input_stream_handler("SyncSetInputStreamHandler", _sync_set_options())
        if cc.options(LLMCalculatorOptions) is None:
            raise ValueError("node_options must carry mediapipe.LLMCalculatorOptions")

    def open(self, cc: CalculatorContext) -> None:
        self.servable = node_servable(cc, RESOURCES, LLMServable, "LLM")
        self.timestamp = 0
        self.events: AsyncIterator[GenerationEvent] | None = None
        self.builder: ResponseBuilder | None = None
        self.request: GenerationRequest | None = None
        self.payload: HttpPayload | None = None
        self.announced: set[int] = set()
        # Responses API requests: the Response envelope, and the event stream when streaming.
        self.envelope: ResponseEnvelope | None = None
        self.responses: ResponsesStream | None = None

    def _emit(self, cc: CalculatorContext, data: bytes, more: bool) -> None:
        cc.outputs[RESPONSE].add(data, self.timestamp)
        if more:
            cc.outputs[LOOPBACK].add(True, self.timestamp)
        self.timestamp += 1

    async def process(self, cc: CalculatorContext) -> None:
        request_packet = cc.inputs[REQUEST]
        if not request_packet.is_empty():
            await self._start(cc, request_packet.payload)
        elif not cc.inputs[LOOPBACK].is_empty():
            await self._stream_step(cc)

    async def _start(self, cc: CalculatorContext, payload: HttpPayload) -> None:
        route = route_of(payload.uri)
        if route == "tokenize":
            reply = await tokenize_reply(
                self.servable.tokenize, request_body(payload), self.servable.max_length
            )
            self._emit(cc, reply, more=False)
            return
        if route == "responses":
            parsed = parse_responses_request(request_body(payload), self.servable.limits)
            request = parsed.generation
            request.ignored_fields = parsed.ignored_fields
            self.envelope = ResponseEnvelope(request.model, parsed.echo)
            if request.stream:
                self.responses = ResponsesStream(self.envelope, self._count_tokens)
            endpoint: Endpoint = "chat"
        else:
            endpoint = endpoint_of(payload.uri)
            request = parse_request(request_body(payload), endpoint, self.servable.limits)
        if request.ignored_fields:
            logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
        self.payload = payload
        self.request = request
        self.builder = ResponseBuilder(
            endpoint,
            request.model,
            include_usage=request.include_usage,
            top_logprobs=request.sampling.top_logprobs,
        )
        media = cc.service(MEDIA_POLICY) if cc.has_service(MEDIA_POLICY) else None
        self.events = aiter(self.servable.generate(request, media))
        if self.responses is not None:
            # The request is taken: say so now, not after the first engine step.
            self._emit(cc, b"".join(map(sse_event, self.responses.start())), more=True)
        elif request.stream:
            await self._stream_step(cc)
        else:
            self._emit(cc, await self._unary(), more=False)

    async def _unary(self) -> bytes:
        assert self.events is not None and self.builder is not None and self.request is not None
        parts: dict[int, list[ParsedDelta]] = {}
        logprobs: dict[int, list[TokenLogprob]] = {}
        reasons: dict[int, str] = {}
        prefix = ""
        prefix_scored = False
        usage = None
        verbose = None
        async for event in self.events:
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
        if self.envelope is not None:  # Responses API: one choice, as output items
            parsed = assemble(parts.get(0, []))
            incomplete = reasons.get(0) == "length"
            body = response_object(
                self.envelope,
                "incomplete" if incomplete else "completed",
                unary_output(parsed, incomplete),
                usage,
                incomplete=incomplete,
                reasoning_tokens=self._count_tokens(parsed.reasoning or ""),
            )
            return dumps(body).encode()
        want_logprobs = self.request.sampling.logprobs
        choices = []
        for index in range(self.request.sampling.n):
            parsed = assemble(parts.get(index, []))
            calls: list[ToolCall] = parsed.tool_calls
            choices.append(
                Choice(
                    index,
                    # OpenAI: content is null only when the reply is tool calls alone.
                    parsed.content if parsed.content is not None or calls else "",
                    reasons.get(index, "stop"),
                    logprobs.get(index, []) if want_logprobs else None,
                    parsed.reasoning,
                    calls,
                )
            )
        body = self.builder.unary(choices, usage, prefix, prefix_scored)
        if verbose is not None:
            body["__verbose"] = verbose
        return dumps(body).encode()

    async def _stream_step(self, cc: CalculatorContext) -> None:
        assert self.events is not None and self.builder is not None
        client = self.payload.client if self.payload else None
        if client is not None and client.is_disconnected():
            await self._abandon()
            return
        try:
            event = await anext(self.events)
        except StopAsyncIteration:
            # The Responses stream ends with its last event: no [DONE] there.
            self._emit(cc, b"" if self.responses is not None else SSE_DONE, more=False)
            return
        except ServableError as error:
            if self.timestamp == 0:
                raise  # nothing sent yet: the server answers with a proper error status
            if self.responses is not None:
                code = "invalid_prompt" if isinstance(error, InvalidRequest) else "server_error"
                failed = self.responses.fail(readable_message(error.message), code)
                self._emit(cc, b"".join(map(sse_event, failed)), more=False)
                await self._abandon()
                return
            body = error_body(
                readable_message(error.message),
                "server_error"
                if not isinstance(error, InvalidRequest)
                else "invalid_request_error",
                error.param,
            )
            self._emit(cc, sse_frame(body) + SSE_DONE, more=False)
            await self._abandon()
            return
        self._emit(cc, self._frames(event), more=event.usage is None)

    def _response_frames(self, event: GenerationEvent, stream: ResponsesStream) -> bytes:
        events = stream.start()  # already sent when the request was taken: nothing
        for update in event.updates:
            events += stream.update(update.text, update.reasoning, update.tool_calls)
        frames = b"".join(map(sse_event, events))
        if event.usage is not None:
            reason = next((u.finish_reason for u in event.updates if u.finish_reason), "stop")
            frames += b"".join(map(sse_event, stream.finish(reason or "stop", event.usage)))
        return frames

    def _frames(self, event: GenerationEvent) -> bytes:
        if self.responses is not None:
            return self._response_frames(event, self.responses)
        builder = self.builder
        assert builder is not None
        frames: list[bytes] = []
        # OVMS puts `__verbose` on the final chunk: the last one that finishes a choice.
        last_finish = max((i for i, u in enumerate(event.updates) if u.finish_reason), default=None)
        for position, update in enumerate(event.updates):
            if builder.endpoint == "chat" and update.index not in self.announced:
                self.announced.add(update.index)
                frames.append(sse_frame(builder.role_chunk(update.index)))
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
                frames.append(sse_frame(chunk))
        if event.usage is not None:
            if builder.include_usage:
                frames.append(sse_frame(builder.usage_chunk(event.usage)))
            frames.append(SSE_DONE)
        return b"".join(frames)

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

    async def _abandon(self) -> None:
        events, self.events = self.events, None
        if events is not None and hasattr(events, "aclose"):
            await events.aclose()

    async def close(self, cc: CalculatorContext) -> None:
        await self._abandon()
