"""Packets: payload plus timestamp, shared not copied; empty packets carry no payload."""

from __future__ import annotations

import pytest

from graphruntime import Packet, Timestamp


def test_packet_keeps_payload_and_timestamp() -> None:
    payload = {"a": 1}
    packet = Packet(payload, 7)
    assert packet.payload is payload
    assert packet.timestamp == 7
    assert isinstance(packet.timestamp, Timestamp)
    assert not packet.is_empty()


def test_default_timestamp_is_unset() -> None:
    assert Packet("x").timestamp == Timestamp.UNSET


def test_at_shares_the_payload_and_leaves_the_original_alone() -> None:
    payload = [1, 2, 3]
    original = Packet(payload, 1)
    moved = original.at(Timestamp(9))
    assert moved.payload is payload
    assert moved.timestamp == 9
    assert original.timestamp == 1
    assert moved is not original


def test_none_is_a_real_payload_not_an_empty_packet() -> None:
    packet = Packet(None, 3)
    assert not packet.is_empty()
    assert packet.payload is None


def test_empty_packet_has_no_payload() -> None:
    empty = Packet.empty(5)
    assert empty.is_empty()
    assert empty.timestamp == 5
    with pytest.raises(LookupError, match="empty"):
        _ = empty.payload
    with pytest.raises(LookupError):
        empty.get()
    assert Packet.empty().timestamp == Timestamp.UNSET


def test_empty_packet_stays_empty_when_restamped() -> None:
    assert Packet.empty(1).at(2).is_empty()


def test_get_checks_the_type() -> None:
    packet = Packet(3, 0)
    assert packet.get() == 3
    assert packet.get(int) == 3
    with pytest.raises(TypeError, match="packet holds int, expected str"):
        packet.get(str)


def test_repr_shows_payload_and_timestamp() -> None:
    assert repr(Packet("hi", 2)) == "Packet('hi', Timestamp(2))"
    assert repr(Packet.empty(Timestamp.DONE)) == "Packet(<empty>, Timestamp.DONE)"
