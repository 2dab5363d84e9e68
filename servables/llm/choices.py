"""How engine output becomes OpenAI choices, one engine step at a time.

Each choice of a request has its own incremental detokenizer (exact stop strings, text that
never ends inside a character) and, when the output is parsed, its own parser splitting content,
reasoning and tool calls. `choice_events` turns the engine's per-step deltas into one
`GenerationEvent` per step that touched the request, keeping the request's timings
(`RequestStats`) as it goes; the last event carries the usage.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field

from servables.llm.detokenizer import IncrementalDetokenizer, TokenTexts
from servables.llm.engine.client import EngineClient, RequestStream
from servables.llm.output_parsers import OutputParser, ParsedDelta, ToolCallDelta
from servables.llm.request import SamplingRequest
from servables.llm.tokenizer_batcher import TokenizerBatcher


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    # None only for echoed prompt tokens nothing predicted (the first; see SequenceDelta)
    logprob: float | None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    def as_dict(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


@dataclass
class ChoiceUpdate:
    index: int
    text: str  # content (with a parser: what it left of the text)
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    prefix: str = ""  # the echoed prompt, on a choice's first update (completions with echo)
    prefix_scored: bool = False  # `logprobs` start with the echoed prompt's tokens'
    reasoning: str = ""
    tool_calls: list[ToolCallDelta] = field(default_factory=list)


@dataclass
class GenerationEvent:
    """What one engine step produced for a request; `usage` is set on the last event."""

    updates: list[ChoiceUpdate]
    usage: Usage | None = None
    # --verbose_response: the prompt after the chat template and the raw output (special tokens
    # kept, nothing parsed), on the last event, as OVMS's `__verbose` object.
    verbose: dict[str, str] | None = None


@dataclass
class Choice:
    """One choice of a request while it is generated."""

    index: int
    detokenizer: IncrementalDetokenizer
    tokens: int = 0
    finish_reason: str | None = None
    prefix: str = ""  # sent once, with the choice's first update
    parser: OutputParser | None = None
    raw_ids: list[int] | None = None  # every generated token, kept for --verbose_response
    prompt_ids: list[int] | None = None  # echo with logprobs: the prompt tokens to name
    max_calls: int | None = None  # 1 when parallel_tool_calls is false
    calls: int = 0  # tool calls started so far

    def parse(self, text: str, finished: bool) -> ParsedDelta:
        """Run the parser over new text; drop calls beyond `max_calls`."""
        assert self.parser is not None
        parsed = self.parser.feed(text) if text else ParsedDelta()
        if finished:
            tail = self.parser.finish()
            parsed.content += tail.content
            parsed.reasoning += tail.reasoning
            parsed.tool_calls += tail.tool_calls
        if self.max_calls is not None:
            parsed.tool_calls = [c for c in parsed.tool_calls if c.index < self.max_calls]
        self.calls = max([self.calls, *(call.index + 1 for call in parsed.tool_calls)])
        return parsed


def new_choices(
    sampling: SamplingRequest,
    decode: Callable[[Sequence[int]], str],
    token_texts: TokenTexts | None,
    echo: str,
    make_parser: Callable[[], OutputParser | None],
    parallel_tool_calls: bool,
) -> dict[int, Choice]:
    """The `n` choices of a request, by index, each with its detokenizer and parser."""
    return {
        index: Choice(
            index,
            IncrementalDetokenizer(
                decode, sampling.stop, sampling.include_stop_str_in_output, texts=token_texts
            ),
            prefix=echo,
            parser=make_parser(),
            max_calls=None if parallel_tool_calls else 1,
        )
        for index in range(sampling.n)
    }


@dataclass
class RequestStats:
    """Timings of one request, for logs and metrics."""

    submitted: float
    first_token: float | None = None
    last_token: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    inter_token: list[float] = field(default_factory=list)
    # The engine step that produced the first token: its prefill (ends a request's queue wait).
    first_step_seconds: float = 0.0


async def choice_events(
    stream: RequestStream,
    choices: dict[int, Choice],
    choice_of_request: dict[int, int],
    want_logprobs: bool,
    skip_special: bool,
    stats: RequestStats,
    engine: EngineClient,
    decodes: TokenizerBatcher[list[int], str],
) -> AsyncIterator[GenerationEvent]:
    """The events of one request: `choices` by index, `choice_of_request` mapping each engine
    request to its choice (-1: a beam search whose sequences are the choices)."""
    unfinished = set(choices)
    while unfinished:
        batch = await stream.next_batch()
        now = time.perf_counter()
        updates: dict[int, ChoiceUpdate] = {}
        for delta in batch:
            mapped = choice_of_request.get(delta.request_id)
            index = delta.index if mapped == -1 else mapped
            if index is None or index not in unfinished:
                continue
            choice = choices[index]
            update = updates.get(index)
            if update is None:
                update = updates[index] = ChoiceUpdate(index, "", prefix=choice.prefix)
                choice.prefix = ""
            if delta.prompt_tokens:  # the engine's exact count (vision prompts)
                stats.prompt_tokens = delta.prompt_tokens
            if delta.prompt_logprobs is not None and want_logprobs and choice.prompt_ids:
                pieces = await decodes.run([[t] for t in choice.prompt_ids], False)
                update.logprobs = [
                    TokenLogprob(piece, logprob)
                    for piece, logprob in zip(pieces, delta.prompt_logprobs, strict=False)
                ]
                update.prefix_scored = True
            tokens = delta.token_ids
            if tokens:
                if stats.first_token is None:
                    stats.first_token = now
                    stats.first_step_seconds = engine.last_step_seconds
                elif stats.last_token is not None:
                    stats.inter_token.append(now - stats.last_token)
                stats.last_token = now
                choice.tokens += len(tokens)
                stats.completion_tokens += len(tokens)
                if choice.raw_ids is not None:
                    choice.raw_ids.extend(tokens)
                detokenizer = choice.detokenizer
                text = detokenizer.add_plain(tokens)
                if text is None:
                    windows = detokenizer.windows(tokens)
                    text = detokenizer.deliver(await decodes.run(windows, skip_special))
                update.text += text
                if want_logprobs:
                    pieces = await decodes.run([[t] for t in tokens], False)
                    update.logprobs = (update.logprobs or []) + [
                        TokenLogprob(piece, logprob)
                        for piece, logprob in zip(pieces, delta.logprobs, strict=False)
                    ]
            finished = choice.detokenizer.stopped or delta.finish_reason is not None
            if finished:
                update.text += choice.detokenizer.finish()
                reason = "stop" if choice.detokenizer.stopped else delta.finish_reason
                choice.finish_reason = update.finish_reason = reason or "stop"
                unfinished.discard(index)
                if mapped != -1:
                    stream.finish(delta.request_id)
        for update in updates.values():
            _parse(choices[update.index], update)
        usage = None
        if not unfinished:
            usage = Usage(stats.prompt_tokens, stats.completion_tokens)
        if updates or usage:
            yield GenerationEvent(sorted(updates.values(), key=lambda u: u.index), usage)


def _parse(choice: Choice, update: ChoiceUpdate) -> None:
    """Split an update's text into content, reasoning and tool calls (if parsing)."""
    if choice.parser is None:
        return
    parsed = choice.parse(update.text, update.finish_reason is not None)
    update.text = parsed.content
    update.reasoning = parsed.reasoning
    update.tool_calls = parsed.tool_calls
    if update.finish_reason == "stop" and choice.calls:
        update.finish_reason = choice.finish_reason = "tool_calls"
