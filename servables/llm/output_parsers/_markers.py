"""Finding markers in streamed text, where a marker may be split between two pieces."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["find_marker", "partial_marker_length"]


def find_marker(text: str, markers: Iterable[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest complete marker in `text[start:]` as (position, marker); longest on a tie."""
    best: tuple[int, str] | None = None
    for marker in markers:
        position = text.find(marker, start)
        if position < 0:
            continue
        if best is None or (position, -len(marker)) < (best[0], -len(best[1])):
            best = (position, marker)
    return best


def partial_marker_length(text: str, markers: Iterable[str]) -> int:
    """Length of the longest end of `text` that is the beginning of a marker but not all of it.

    That much must be held back: the next piece of text may complete the marker.
    """
    longest = 0
    for marker in markers:
        first = marker[0]
        # Candidates start with the marker's first character, late enough to be a proper prefix;
        # the earliest one that fits is the longest.
        position = text.find(first, max(0, len(text) - len(marker) + 1))
        while position >= 0 and len(text) - position > longest:
            if marker.startswith(text[position:]):
                longest = len(text) - position
                break
            position = text.find(first, position + 1)
    return longest
