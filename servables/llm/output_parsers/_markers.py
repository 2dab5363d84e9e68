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
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest
