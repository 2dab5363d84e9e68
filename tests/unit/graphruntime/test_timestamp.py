"""Timestamps: MediaPipe's special values and the stream-order helpers built on them."""

from __future__ import annotations

import pytest

from graphruntime import timestamp as ts
from graphruntime.timestamp import Timestamp

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def test_special_values_sit_at_the_int64_extremes_in_mediapipe_order() -> None:
    assert Timestamp.UNSET == INT64_MIN
    assert Timestamp.UNSTARTED == INT64_MIN + 1
    assert Timestamp.PRESTREAM == INT64_MIN + 2
    assert Timestamp.MIN == INT64_MIN + 3
    assert Timestamp.MAX == INT64_MAX - 3
    assert Timestamp.POSTSTREAM == INT64_MAX - 2
    assert Timestamp.ONE_OVER_POSTSTREAM == INT64_MAX - 1
    assert Timestamp.DONE == INT64_MAX
    assert Timestamp() == Timestamp.UNSET


def test_special_and_range_classification() -> None:
    for special in (
        Timestamp.UNSET,
        Timestamp.UNSTARTED,
        Timestamp.PRESTREAM,
        Timestamp.POSTSTREAM,
        Timestamp.ONE_OVER_POSTSTREAM,
        Timestamp.DONE,
    ):
        assert special.is_special()
        assert not special.is_range_value()
    for value in (Timestamp.MIN, Timestamp(0), Timestamp(-5), Timestamp.MAX):
        assert not value.is_special()
        assert value.is_range_value()


def test_allowed_in_stream_is_prestream_through_poststream() -> None:
    assert not Timestamp.UNSET.is_allowed_in_stream()
    assert not Timestamp.UNSTARTED.is_allowed_in_stream()
    assert Timestamp.PRESTREAM.is_allowed_in_stream()
    assert Timestamp.MIN.is_allowed_in_stream()
    assert Timestamp(0).is_allowed_in_stream()
    assert Timestamp.MAX.is_allowed_in_stream()
    assert Timestamp.POSTSTREAM.is_allowed_in_stream()
    assert not Timestamp.ONE_OVER_POSTSTREAM.is_allowed_in_stream()
    assert not Timestamp.DONE.is_allowed_in_stream()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, 1),
        (-7, -6),
        (ts.MIN, ts.MIN + 1),
        (ts.MAX - 1, ts.MAX),
        # Nothing may follow MAX, PRESTREAM or POSTSTREAM.
        (ts.MAX, ts.ONE_OVER_POSTSTREAM),
        (ts.PRESTREAM, ts.ONE_OVER_POSTSTREAM),
        (ts.POSTSTREAM, ts.ONE_OVER_POSTSTREAM),
        (ts.DONE, ts.ONE_OVER_POSTSTREAM),
        # Below the range: the first range value.
        (ts.UNSTARTED, ts.MIN),
        (ts.UNSET, ts.MIN),
    ],
)
def test_next_allowed_in_stream(value: int, expected: int) -> None:
    assert Timestamp(value).next_allowed_in_stream() == expected
    assert isinstance(Timestamp(value).next_allowed_in_stream(), Timestamp)
    assert ts.next_allowed_in_stream(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 0),
        (0, -1),
        (ts.MIN + 1, ts.MIN),
        # Nothing is settled before MIN, and a POSTSTREAM bound settles nothing either.
        (ts.MIN, ts.UNSTARTED),
        (ts.PRESTREAM, ts.UNSTARTED),
        (ts.POSTSTREAM, ts.UNSTARTED),
        # Above the range: the last range value.
        (ts.ONE_OVER_POSTSTREAM, ts.MAX),
        (ts.DONE, ts.MAX),
    ],
)
def test_previous_allowed_in_stream(value: int, expected: int) -> None:
    assert Timestamp(value).previous_allowed_in_stream() == expected
    assert ts.previous_allowed_in_stream(value) == expected


def test_next_and_previous_are_inverse_inside_the_range() -> None:
    for value in (ts.MIN, -1, 0, 1, 10**12, ts.MAX - 1):
        assert ts.previous_allowed_in_stream(ts.next_allowed_in_stream(value)) == value


def test_construction_outside_int64_is_refused() -> None:
    with pytest.raises(ValueError, match="does not fit in int64"):
        Timestamp(INT64_MAX + 1)
    with pytest.raises(ValueError, match="does not fit in int64"):
        Timestamp(INT64_MIN - 1)
    assert Timestamp(INT64_MAX) == Timestamp.DONE


def test_timestamps_are_ints_so_arithmetic_and_comparison_are_plain() -> None:
    five = Timestamp(5)
    assert five + 1 == 6
    assert five - 10 == -5
    assert Timestamp(3) < five < Timestamp.MAX < Timestamp.POSTSTREAM < Timestamp.DONE
    assert Timestamp.UNSET < Timestamp.UNSTARTED < Timestamp.PRESTREAM < Timestamp.MIN
    assert {5: "x"}[Timestamp(5)] == "x"
    assert Timestamp(Timestamp(7)) == 7


def test_seconds_conversion() -> None:
    assert Timestamp.from_seconds(1.5) == 1_500_000
    assert Timestamp.from_seconds(-0.000001) == -1
    assert Timestamp(2_500_000).seconds() == 2.5
    assert Timestamp(42).microseconds() == 42


def test_repr_and_describe_name_special_values() -> None:
    assert repr(Timestamp(5)) == "Timestamp(5)"
    assert str(Timestamp.PRESTREAM) == "Timestamp.PRESTREAM"
    assert repr(Timestamp.MIN) == "Timestamp.MIN"
    assert repr(Timestamp.MAX) == "Timestamp.MAX"
    assert repr(Timestamp.DONE) == "Timestamp.DONE"
    assert ts.describe(7) == "7"
    assert ts.describe(ts.POSTSTREAM) == "Timestamp.POSTSTREAM"
    assert ts.describe(ts.UNSET) == "Timestamp.UNSET"
