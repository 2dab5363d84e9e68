"""Marker search over streamed text: the earliest complete marker, and what must be held back."""

from __future__ import annotations

import pytest

from servables.llm.output_parsers._markers import find_marker, partial_marker_length

MARKERS = ("<tool_call>", "</tool_call>", "<|eot_id|>", "<")


@pytest.mark.parametrize(
    ("text", "held"),
    [
        ("Hello", 0),
        ("Hello <tool_c", len("<tool_c")),
        ("Hello </", 2),
        ("a<b", 0),  # "<b" cannot begin any marker; "<" alone is a whole marker
        ("x <|eot", len("<|eot")),
        ("<tool_call", len("<tool_call")),
        ("<tool_call>", 0),  # complete: found, not held
    ],
)
def test_only_an_unfinished_marker_at_the_end_is_held(text: str, held: int) -> None:
    assert partial_marker_length(text, MARKERS) == held


def test_the_earliest_marker_wins_and_the_longest_on_a_tie() -> None:
    assert find_marker("a </tool_call> <tool_call>", MARKERS) == (2, "</tool_call>")
    assert find_marker("x <tool_call>", MARKERS) == (2, "<tool_call>")
    assert find_marker("no markers", MARKERS[:3]) is None
