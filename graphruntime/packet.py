"""Packets: an immutable payload stamped with a timestamp.

Any Python object can be a payload; the runtime never copies it, so every consumer of a stream sees
the same object. Treat payloads as immutable once sent, as MediaPipe requires of its packets.
"""

from __future__ import annotations

from typing import Any, Generic, SupportsInt, TypeVar, overload

from graphruntime.timestamp import UNSET, Timestamp

T = TypeVar("T")
U = TypeVar("U")


class _Empty:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<empty>"


_EMPTY: Any = _Empty()


class Packet(Generic[T]):
    """A payload and its timestamp. `Packet.empty()` carries no payload (a missing input)."""

    __slots__ = ("_payload", "_timestamp")

    _payload: T
    _timestamp: int

    def __init__(self, payload: T, timestamp: SupportsInt = UNSET) -> None:
        self._payload = payload
        self._timestamp = int(timestamp)

    @staticmethod
    def empty(timestamp: SupportsInt = UNSET) -> Packet[Any]:
        return Packet(_EMPTY, timestamp)

    def is_empty(self) -> bool:
        return self._payload is _EMPTY

    @property
    def timestamp(self) -> Timestamp:
        return Timestamp(self._timestamp)

    @property
    def payload(self) -> T:
        """The payload; raises `LookupError` on an empty packet rather than returning a sentinel."""
        if self._payload is _EMPTY:
            raise LookupError(f"packet at {self.timestamp!r} is empty")
        return self._payload

    @overload
    def get(self) -> T: ...
    @overload
    def get(self, expected_type: type[U]) -> U: ...
    def get(self, expected_type: type[Any] | None = None) -> Any:
        """The payload, checked against `expected_type` when given."""
        payload = self.payload
        if expected_type is not None and not isinstance(payload, expected_type):
            raise TypeError(
                f"packet holds {type(payload).__name__}, expected {expected_type.__name__}"
            )
        return payload

    def at(self, timestamp: SupportsInt) -> Packet[T]:
        """The same payload at another timestamp (the payload is shared, not copied)."""
        return Packet(self._payload, timestamp)

    def __repr__(self) -> str:
        return f"Packet({self._payload!r}, {self.timestamp!r})"
