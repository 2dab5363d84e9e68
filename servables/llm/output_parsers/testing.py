"""The streaming contract of output parsers, as checks a test can run on any family.

    unary = check_splits(parser_factory("hermes3"), text, markup=("<tool_call>",))

`check_splits` parses a text whole, then streams it split at every character boundary,
character by character and in seeded random token-sized pieces: every way must give the unary
result, and the deltas themselves must keep the contract (ids and names only on a call's first
delta, calls numbered in order, arguments valid JSON, no markup in content or reasoning).
Written for graphrt's tests; a new family's author can use it the same way.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from servables.llm.output_parsers.base import OutputParser, assemble
from servables.llm.output_parsers.registry import make_output_parser
from servables.llm.output_parsers.types import ParsedDelta, ParsedOutput

__all__ = ["calls_of", "check_deltas", "check_splits", "parser_factory", "shape", "streamed"]

Factory = Callable[[], OutputParser]


def parser_factory(
    tool_parser: str | None,
    reasoning_parser: str | None = None,
    *,
    tools: Sequence[Mapping[str, Any]] | None,
    starts_in_reasoning: bool = False,
) -> Factory:
    def make() -> OutputParser:
        parser = make_output_parser(
            tool_parser, reasoning_parser, tools=tools, starts_in_reasoning=starts_in_reasoning
        )
        assert parser is not None
        return parser

    return make


def stream_deltas(parser: OutputParser, pieces: Iterable[str]) -> list[ParsedDelta]:
    return [*(parser.feed(piece) for piece in pieces), parser.finish()]


def streamed(parser: OutputParser, pieces: Iterable[str]) -> ParsedOutput:
    return assemble(stream_deltas(parser, pieces))


def shape(output: ParsedOutput) -> tuple[Any, ...]:
    """The output without the random ids."""
    return (
        output.content,
        output.reasoning,
        [(call.name, call.arguments) for call in output.tool_calls],
    )


def check_deltas(deltas: Sequence[ParsedDelta], markup: Sequence[str]) -> None:
    started: set[int] = set()
    arguments: dict[int, str] = {}
    for delta in deltas:
        for channel in (delta.content, delta.reasoning):
            for marker in markup:
                assert marker not in channel, f"{marker!r} leaked into {channel!r}"
        for call in delta.tool_calls:
            if call.index not in started:
                assert call.id is not None and call.id.startswith("call_"), call
                assert call.name, call
                assert call.index == len(started), "calls must be numbered 0, 1, ... in order"
                started.add(call.index)
            else:
                assert call.id is None and call.name is None, f"id/name repeated: {call}"
            arguments[call.index] = arguments.get(call.index, "") + call.arguments
    for text in arguments.values():
        json.loads(text)


def check_splits(
    make: Factory, text: str, *, markup: Sequence[str] = (), random_runs: int = 12
) -> ParsedOutput:
    """Parse `text` whole, then streamed in many ways; all must agree. Returns the unary result.

    Raises AssertionError naming the split that disagreed.
    """
    parser = make()
    deltas = stream_deltas(parser, [text])
    check_deltas(deltas, markup)
    unary = make().parse(text)
    assert shape(assemble(deltas)) == shape(unary)
    for call in unary.tool_calls:
        json.loads(call.arguments)
    expected = shape(unary)
    for cut in range(len(text) + 1):
        pieces = [text[:cut], text[cut:]]
        deltas = stream_deltas(make(), pieces)
        check_deltas(deltas, markup)
        assert shape(assemble(deltas)) == expected, f"split at {cut}: {pieces}"
    deltas = stream_deltas(make(), list(text))
    check_deltas(deltas, markup)
    assert shape(assemble(deltas)) == expected, "character by character"
    generator = random.Random(len(text))
    for _ in range(random_runs):
        pieces = []
        position = 0
        while position < len(text):
            size = generator.randint(1, 7)
            pieces.append(text[position : position + size])
            position += size
        deltas = stream_deltas(make(), pieces)
        check_deltas(deltas, markup)
        assert shape(assemble(deltas)) == expected, f"pieces {pieces}"
    return unary


def calls_of(output: ParsedOutput) -> list[tuple[str, Any]]:
    """(name, decoded arguments) of each call."""
    return [(call.name, json.loads(call.arguments)) for call in output.tool_calls]
