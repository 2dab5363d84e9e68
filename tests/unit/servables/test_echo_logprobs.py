"""Echo with logprobs: the engine's echoed prompt is taken apart from the generated tokens, and
the prompt's logprobs are laid out before theirs, with offsets into the echoed text."""

from __future__ import annotations

from dataclasses import dataclass, field

from servables.llm.choices import TokenLogprob, Usage
from servables.llm.engine.batching import _delta, _Live
from servables.openai.bodies import Choice, ResponseBuilder


@dataclass
class Output:
    """The fields of genai's GenerationOutput that the loop reads."""

    generated_ids: list[int]
    generated_log_probs: list[float]
    finish_reason: object = None
    extra: dict[str, object] = field(default_factory=dict)


def echoing(prompt_tokens: int) -> _Live:
    live = _Live(7, None, False, prompt_tokens)
    live.echo_tokens = prompt_tokens
    return live


def test_the_first_output_gives_the_prompt_logprobs_apart() -> None:
    live = echoing(3)
    # genai: the prompt's ids, its placeholder 1.0 and two scores, then the first token
    first = _delta(live, 0, Output([5, 6, 7, 42], [1.0, -2.0, -3.0, -0.5]), None)
    assert first.token_ids == [42] and first.logprobs == [-0.5]
    assert first.prompt_logprobs == [None, -2.0, -3.0]
    later = _delta(live, 0, Output([43], [-0.7]), "length")
    assert later.token_ids == [43] and later.prompt_logprobs is None


def test_prompt_tokens_from_the_prefix_cache_have_no_logprob() -> None:
    """genai scores only what it computes: cached leading tokens come without scores."""
    live = echoing(4)
    first = _delta(live, 0, Output([5, 6, 7, 8, 42], [-3.0, -4.0, -0.5]), None)
    assert first.prompt_logprobs == [None, None, -3.0, -4.0]
    assert first.token_ids == [42] and first.logprobs == [-0.5]


def test_echo_only_requests_have_no_generated_tokens() -> None:
    first = _delta(echoing(2), 0, Output([5, 6], [1.0, -2.0]), None)
    assert first.token_ids == [] and first.prompt_logprobs == [None, -2.0]


def test_without_echo_outputs_pass_unchanged() -> None:
    delta = _delta(_Live(7, None, False, 3), 0, Output([42], [-0.5]), None)
    assert delta.token_ids == [42] and delta.prompt_logprobs is None


PROMPT = [TokenLogprob("Hi", None), TokenLogprob(" there", -2.0)]
GENERATED = [TokenLogprob(" you", -0.5)]


def test_streamed_offsets_start_at_the_echoed_prompt() -> None:
    builder = ResponseBuilder("completions", "m")
    first = builder.delta_chunk(
        0, " you", PROMPT + GENERATED, prefix="Hi there", prefix_scored=True
    )
    second = builder.delta_chunk(0, "!", [TokenLogprob("!", -1.0)], "length")
    logprobs = first["choices"][0]["logprobs"]
    assert logprobs["text_offset"] == [0, 2, 8]
    assert logprobs["token_logprobs"] == [None, -2.0, -0.5]
    assert logprobs["top_logprobs"][0] is None
    assert second["choices"][0]["logprobs"]["text_offset"] == [12]


def test_unary_offsets_start_at_zero_when_the_prompt_is_scored() -> None:
    builder = ResponseBuilder("completions", "m")
    body = builder.unary(
        [Choice(0, " you", "length", PROMPT + GENERATED)], Usage(2, 1), "Hi there", True
    )
    assert body["choices"][0]["text"] == "Hi there you"
    assert body["choices"][0]["logprobs"]["text_offset"] == [0, 2, 8]
