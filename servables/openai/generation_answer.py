"""What a generation answers in OpenAI's APIs: the engine's GenerationEvents as response bodies
and stream events, for chat completions, completions and the Responses API.

The protocol owns the shapes: a unary answer is one body assembled from every choice's deltas;
a stream is one step of events per engine step (chat: a role chunk when a choice starts, delta
chunks, the usage chunk and `[DONE]`; Responses: its numbered events, opened with
`response.created` as soon as the request is taken). How the steps travel (SSE, a graph's LOOPBACK
cycle) is the caller's business.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from servables.errors import InvalidRequest, ServableError, readable_message
from servables.llm.choices import GenerationEvent, TokenLogprob
from servables.llm.output_parsers import ParsedDelta, ToolCall
from servables.llm.output_parsers.base import assemble
from servables.llm.request import Endpoint, GenerationRequest, Limits
from servables.openai.bodies import Choice, ResponseBuilder, error_body
from servables.openai.protocol import parse_request
from servables.openai.responses import (
    ResponseEnvelope,
    ResponsesStream,
    parse_responses_request,
    response_object,
    unary_output,
)

logger = logging.getLogger(__name__)

# Events that end a Response: its stream has no [DONE].
RESPONSE_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


@dataclass(frozen=True)
class StreamStep:
    """One step of a stream: its events' JSON, then chat/completions' `[DONE]` when `done`.
    Responses events name themselves by their `type` (an SSE `event:` line repeats it)."""

    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False


class GenerationAnswer:
    """One request's answer; see the module docstring. `count_tokens` counts the reasoning
    tokens the Responses API reports."""

    def __init__(
        self,
        request: GenerationRequest,
        endpoint: Endpoint,
        envelope: ResponseEnvelope | None = None,
        count_tokens: Callable[[str], int] | None = None,
    ) -> None:
        self.request = request
        self.builder = ResponseBuilder(
            endpoint,
            request.model,
            include_usage=request.include_usage,
            top_logprobs=request.sampling.top_logprobs,
        )
        self.envelope = envelope
        self.count_tokens = count_tokens or (lambda text: 0)
        self.responses = (
            ResponsesStream(envelope, self.count_tokens)
            if envelope is not None and request.stream
            else None
        )
        self.announced: set[int] = set()

    @property
    def names_events(self) -> bool:
        """Whether the stream's events are the Responses API's (named on an `event:` line)."""
        return self.responses is not None

    async def unary(self, events: AsyncIterator[GenerationEvent]) -> dict[str, Any]:
        """The whole answer, once the generation is over."""
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
        if self.envelope is not None:  # Responses API: one choice, as output items
            parsed = assemble(parts.get(0, []))
            incomplete = reasons.get(0) == "length"
            return response_object(
                self.envelope,
                "incomplete" if incomplete else "completed",
                unary_output(parsed, incomplete),
                usage,
                incomplete=incomplete,
                reasoning_tokens=self.count_tokens(parsed.reasoning or ""),
            )
        sampling = self.request.sampling
        choices = []
        for index in range(sampling.n):
            parsed = assemble(parts.get(index, []))
            calls: list[ToolCall] = parsed.tool_calls
            choices.append(
                Choice(
                    index,
                    # OpenAI: content is null only when the reply is tool calls alone.
                    parsed.content if parsed.content is not None or calls else "",
                    reasons.get(index, "stop"),
                    logprobs.get(index, []) if sampling.logprobs else None,
                    parsed.reasoning,
                    calls,
                )
            )
        body = self.builder.unary(choices, usage, prefix, prefix_scored)
        if verbose is not None:
            body["__verbose"] = verbose
        return body

    def start(self) -> StreamStep:
        """What a stream says before the first engine step: the Responses API announces the
        Response at once; chat/completions say nothing yet."""
        return StreamStep(self.responses.start() if self.responses is not None else [])

    def step(self, event: GenerationEvent) -> StreamStep:
        """One engine step's events; the last step (with usage) ends the stream."""
        if self.responses is not None:
            return self._responses_step(event, self.responses)
        builder = self.builder
        events: list[dict[str, Any]] = []
        # OVMS puts `__verbose` on the final chunk: the last one that finishes a choice.
        last_finish = max((i for i, u in enumerate(event.updates) if u.finish_reason), default=None)
        for position, update in enumerate(event.updates):
            if builder.endpoint == "chat" and update.index not in self.announced:
                self.announced.add(update.index)
                events.append(builder.role_chunk(update.index))
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
                events.append(chunk)
        if event.usage is None:
            return StreamStep(events)
        if builder.include_usage:
            events.append(builder.usage_chunk(event.usage))
        return StreamStep(events, done=True)

    @staticmethod
    def _responses_step(event: GenerationEvent, stream: ResponsesStream) -> StreamStep:
        events = stream.start()  # already sent when the request was taken: nothing
        for update in event.updates:
            events += stream.update(update.text, update.reasoning, update.tool_calls)
        if event.usage is not None:
            reason = next((u.finish_reason for u in event.updates if u.finish_reason), "stop")
            events += stream.finish(reason or "stop", event.usage)
        return StreamStep(events)

    def failure(self, error: ServableError) -> StreamStep:
        """How the stream ends when the engine fails after it started: chat/completions' error
        event and [DONE], or `response.failed`."""
        message = readable_message(error.message)
        invalid = isinstance(error, InvalidRequest)
        if self.responses is not None:
            code = "invalid_prompt" if invalid else "server_error"
            return StreamStep(self.responses.fail(message, code))
        kind = "invalid_request_error" if invalid else "server_error"
        return StreamStep([error_body(message, kind, error.param)], done=True)

    def exhausted(self) -> StreamStep:
        """The generation ended without its last step: chat/completions still end with [DONE]."""
        return StreamStep([], done=self.responses is None)


def generation_answer(
    body: Any,
    endpoint: Endpoint | None,
    limits: Limits,
    count_tokens: Callable[[str], int] | None = None,
) -> GenerationAnswer:
    """The request of a chat or completions body (`endpoint`), or of a Responses body (None),
    checked, and the answer that will carry its generation."""
    envelope = None
    if endpoint is None:
        parsed = parse_responses_request(body, limits)
        request = parsed.generation
        request.ignored_fields = parsed.ignored_fields
        envelope = ResponseEnvelope(request.model, parsed.echo)
        endpoint = "chat"
    else:
        request = parse_request(body, endpoint, limits)
    if request.ignored_fields:
        logger.debug("ignoring request fields: %s", ", ".join(request.ignored_fields))
    return GenerationAnswer(request, endpoint, envelope, count_tokens)
