"""Packet timestamps with MediaPipe's special values.

A timestamp is an int64 count of microseconds. The extreme int64 values are reserved for special
meanings (before the stream, after it, "closed") so that timestamp bounds can be plain integer
comparisons. `Timestamp` subclasses `int` for that reason: the scheduler compares and stores raw
ints on its hot path and only user-facing objects pay for the subclass.
"""

from __future__ import annotations

from typing import ClassVar, SupportsInt

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1

UNSET = _INT64_MIN
UNSTARTED = _INT64_MIN + 1
PRESTREAM = _INT64_MIN + 2
MIN = _INT64_MIN + 3
MAX = _INT64_MAX - 3
POSTSTREAM = _INT64_MAX - 2
ONE_OVER_POSTSTREAM = _INT64_MAX - 1
DONE = _INT64_MAX

_SPECIAL_NAMES = {
    UNSET: "UNSET",
    UNSTARTED: "UNSTARTED",
    PRESTREAM: "PRESTREAM",
    POSTSTREAM: "POSTSTREAM",
    ONE_OVER_POSTSTREAM: "ONE_OVER_POSTSTREAM",
    DONE: "DONE",
}

UNITS_PER_SECOND = 1_000_000


def next_allowed_in_stream(value: int) -> int:
    """The lowest timestamp a stream accepts after a packet at `value`."""
    if value >= MAX or value == PRESTREAM:
        return ONE_OVER_POSTSTREAM
    if value < MIN:
        return MIN
    return value + 1


def previous_allowed_in_stream(value: int) -> int:
    """The highest timestamp that is settled once the bound is `value`."""
    if value <= MIN or value == POSTSTREAM:
        return UNSTARTED
    if value > MAX:
        return MAX
    return value - 1


def is_allowed_in_stream(value: int) -> bool:
    return PRESTREAM <= value <= POSTSTREAM


def describe(value: int) -> str:
    """Human form used in error messages: `5` or `Timestamp.PRESTREAM`."""
    name = _SPECIAL_NAMES.get(value)
    return f"Timestamp.{name}" if name else str(value)


class Timestamp(int):
    """An int64 microsecond timestamp; the class attributes are MediaPipe's special values.

    `Timestamp(5)` is a normal timestamp; `Timestamp.PRESTREAM` and friends mark the summary packet
    before a stream, the one after it, and the bounds of unstarted and closed streams.
    """

    __slots__ = ()

    UNSET: ClassVar[Timestamp]
    UNSTARTED: ClassVar[Timestamp]
    PRESTREAM: ClassVar[Timestamp]
    MIN: ClassVar[Timestamp]
    MAX: ClassVar[Timestamp]
    POSTSTREAM: ClassVar[Timestamp]
    ONE_OVER_POSTSTREAM: ClassVar[Timestamp]
    DONE: ClassVar[Timestamp]

    def __new__(cls, value: SupportsInt = UNSET) -> Timestamp:
        number = int(value)
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise ValueError(f"timestamp {number} does not fit in int64")
        return super().__new__(cls, number)

    @classmethod
    def from_seconds(cls, seconds: float) -> Timestamp:
        return cls(round(seconds * UNITS_PER_SECOND))

    def seconds(self) -> float:
        return int(self) / UNITS_PER_SECOND

    def microseconds(self) -> int:
        return int(self)

    def is_special(self) -> bool:
        return int(self) < MIN or int(self) > MAX

    def is_range_value(self) -> bool:
        return MIN <= int(self) <= MAX

    def is_allowed_in_stream(self) -> bool:
        return is_allowed_in_stream(int(self))

    def next_allowed_in_stream(self) -> Timestamp:
        return Timestamp(next_allowed_in_stream(int(self)))

    def previous_allowed_in_stream(self) -> Timestamp:
        return Timestamp(previous_allowed_in_stream(int(self)))

    def __repr__(self) -> str:
        name = _SPECIAL_NAMES.get(int(self))
        if name:
            return f"Timestamp.{name}"
        if int(self) == MIN:
            return "Timestamp.MIN"
        if int(self) == MAX:
            return "Timestamp.MAX"
        return f"Timestamp({int(self)})"

    __str__ = __repr__


Timestamp.UNSET = Timestamp(UNSET)
Timestamp.UNSTARTED = Timestamp(UNSTARTED)
Timestamp.PRESTREAM = Timestamp(PRESTREAM)
Timestamp.MIN = Timestamp(MIN)
Timestamp.MAX = Timestamp(MAX)
Timestamp.POSTSTREAM = Timestamp(POSTSTREAM)
Timestamp.ONE_OVER_POSTSTREAM = Timestamp(ONE_OVER_POSTSTREAM)
Timestamp.DONE = Timestamp(DONE)
