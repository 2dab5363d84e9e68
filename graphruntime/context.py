"""What a calculator sees during open / process / close: its inputs, outputs and side packets.

Ports are addressed by tag ("TEXT"), by (tag, index), by flat id, or by the `Port` class attribute
that declared them (which also types the result). One context is reused across calls of a node
(or one per concurrent call when `max_in_flight` > 1), so nothing here is allocated per packet.

When the calculator runs on a worker thread, outputs are buffered in the context and handed to the
event loop when the call returns; everywhere else they are delivered immediately.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

from google.protobuf.message import Message

from graphruntime.calculator import Input, InputSidePacket, Output, OutputSidePacket, Port
from graphruntime.errors import GraphError
from graphruntime.packet import Packet
from graphruntime.services import GraphService
from graphruntime.streams import OutputStream, StreamError
from graphruntime.tags import TagMap
from graphruntime.timestamp import UNSTARTED, Timestamp

T = TypeVar("T")
M = TypeVar("M", bound=Message)

PortKey = str | int | tuple[str, int] | Port[Any]


def _flat_id(tag_map: TagMap, key: PortKey) -> int:
    if isinstance(key, int):
        if not 0 <= key < len(tag_map):
            raise KeyError(f"no port with flat id {key}")
        return key
    if isinstance(key, str):
        tag, index = key, 0
    elif isinstance(key, tuple):
        tag, index = key
    else:
        tag, index = key.tag, key.index
    flat_id = tag_map.find(tag, index)
    if flat_id is None:
        raise KeyError(f'no port with tag "{tag}" index {index}')
    return flat_id


class InputPackets:
    """The packets of the current call, one per input stream (empty where nothing arrived).

    `packets` is the same list by flat id, for calculators that visit every port on each call:
    a plain list iterates in C, where iterating this object costs a Python call (a
    PassThroughCalculator hop spent a third of its time in `zip(cc.inputs, cc.outputs)`).
    """

    __slots__ = ("_packets", "_tag_map", "packets")

    def __init__(self, tag_map: TagMap) -> None:
        self._tag_map = tag_map
        self._packets: list[Packet[Any]] = [Packet.empty()] * len(tag_map)
        # Read-only for calculators; the runtime refills `_packets` in place on every call.
        self.packets: Sequence[Packet[Any]] = self._packets

    @overload
    def __getitem__(self, key: Input[T]) -> Packet[T]: ...
    @overload
    def __getitem__(self, key: str | int | tuple[str, int]) -> Packet[Any]: ...
    def __getitem__(self, key: PortKey) -> Packet[Any]:
        return self._packets[_flat_id(self._tag_map, key)]

    def __iter__(self) -> Iterator[Packet[Any]]:
        return iter(self._packets)

    def __len__(self) -> int:
        return len(self._packets)

    def has_tag(self, tag: str) -> bool:
        return self._tag_map.has_tag(tag)

    def tag(self, tag: str) -> list[Packet[Any]]:
        """Packets of every index of `tag`, in index order."""
        return [self._packets[self._tag_map.id(tag, i)] for i in range(self._tag_map.count(tag))]

    @property
    def tag_map(self) -> TagMap:
        return self._tag_map


class _DetachedEmitState:
    """What a finished run's output handles keep of their context (`CalculatorContext.detach`):
    the last input timestamp, and no worker-thread buffer, so a late `add` meets the closed
    stream's own error as before."""

    __slots__ = ("_buffer", "_input_timestamp")

    def __init__(self, input_timestamp: int) -> None:
        self._input_timestamp = input_timestamp
        self._buffer: list[tuple[OutputStream, Packet[Any] | int]] | None = None


class OutputStreamHandle:
    """A calculator's view of one output stream."""

    __slots__ = ("_context", "_stream")

    def __init__(self, stream: OutputStream, context: CalculatorContext) -> None:
        self._stream = stream
        self._context: CalculatorContext | _DetachedEmitState = context

    @property
    def name(self) -> str:
        return self._stream.name

    @property
    def next_timestamp_bound(self) -> Timestamp:
        return Timestamp(self._stream.bound)

    def add(self, payload: Any, timestamp: int | None = None) -> None:
        """Send `payload` at `timestamp` (default: the current input timestamp)."""
        self.add_packet(
            Packet(payload, self._context._input_timestamp if timestamp is None else timestamp)
        )

    def add_packet(self, packet: Packet[Any]) -> None:
        buffer = self._context._buffer
        if buffer is None:
            self._stream.add(packet)
        else:
            buffer.append((self._stream, packet))

    def set_next_timestamp_bound(self, bound: int) -> None:
        """Promise no packet below `bound` will follow, so consumers need not wait for one."""
        buffer = self._context._buffer
        if buffer is None:
            self._stream.raise_bound(int(bound))
        else:
            buffer.append((self._stream, int(bound)))

    def close(self) -> None:
        self.set_next_timestamp_bound(Timestamp.DONE)


class OutputStreams:
    """A calculator's output streams; `handles` lists them by flat id (see `InputPackets`)."""

    __slots__ = ("_handles", "_tag_map", "handles")

    def __init__(self, tag_map: TagMap, handles: Sequence[OutputStreamHandle]) -> None:
        self._tag_map = tag_map
        self._handles = list(handles)
        self.handles: Sequence[OutputStreamHandle] = tuple(handles)

    def __getitem__(self, key: PortKey | Output[Any]) -> OutputStreamHandle:
        return self._handles[_flat_id(self._tag_map, key)]

    def __iter__(self) -> Iterator[OutputStreamHandle]:
        return iter(self._handles)

    def __len__(self) -> int:
        return len(self._handles)

    def has_tag(self, tag: str) -> bool:
        return self._tag_map.has_tag(tag)

    @property
    def tag_map(self) -> TagMap:
        return self._tag_map


class InputSidePackets:
    __slots__ = ("_packets", "_tag_map")

    def __init__(self, tag_map: TagMap, packets: Sequence[Packet[Any]]) -> None:
        self._tag_map = tag_map
        self._packets = list(packets)

    @overload
    def __getitem__(self, key: InputSidePacket[T]) -> Packet[T]: ...
    @overload
    def __getitem__(self, key: str | int | tuple[str, int]) -> Packet[Any]: ...
    def __getitem__(self, key: PortKey) -> Packet[Any]:
        return self._packets[_flat_id(self._tag_map, key)]

    def has_tag(self, tag: str) -> bool:
        return self._tag_map.has_tag(tag)

    def __len__(self) -> int:
        return len(self._packets)


class OutputSidePackets:
    """Side packets this node produces; each may be set once per run."""

    __slots__ = ("_setter", "_tag_map")

    def __init__(self, tag_map: TagMap, setter: Any) -> None:
        self._tag_map = tag_map
        self._setter = setter

    def set(self, key: PortKey | OutputSidePacket[Any], value: Any) -> None:
        name = self._tag_map.names[_flat_id(self._tag_map, key)]
        self._setter(name, value if isinstance(value, Packet) else Packet(value))

    def detach(self) -> None:
        """The run has finished: forget its setter (see `CalculatorContext.detach`)."""
        self._setter = _set_after_run

    def has_tag(self, tag: str) -> bool:
        return self._tag_map.has_tag(tag)


def _set_after_run(name: str, packet: Packet[Any]) -> None:
    raise GraphError(f'Output side packet "{name}" was set after the graph run finished.')


class CalculatorContext:
    """Everything one call of open / process / close may use."""

    __slots__ = (
        "_buffer",
        "_input_timestamp",
        "_options",
        "_options_type",
        "_services",
        "_started",
        "calculator_type",
        "graph_error",
        "input_side_packets",
        "inputs",
        "node_name",
        "output_side_packets",
        "outputs",
    )

    def __init__(
        self,
        node_name: str,
        calculator_type: str,
        inputs: InputPackets,
        input_side_packets: InputSidePackets,
        output_side_packets: OutputSidePackets,
        options_decoder: Callable[[type[Message]], Message | None],
        options_type: type[Message] | None,
        services: Mapping[GraphService[Any], Any] | None = None,
    ) -> None:
        self.node_name = node_name
        self.calculator_type = calculator_type
        self.inputs = inputs
        self.outputs = OutputStreams(TagMap.empty(), ())
        self.input_side_packets = input_side_packets
        self.output_side_packets = output_side_packets
        self._options = options_decoder
        self._options_type = options_type
        self._services = services or {}
        self._input_timestamp = UNSTARTED
        self._started = 0  # perf_counter_ns() when the current call began (set when observed)
        self._buffer: list[tuple[OutputStream, Packet[Any] | int]] | None = None
        # The run's error, visible to close() after a failure (MediaPipe's GraphStatus()).
        self.graph_error: GraphError | None = None

    @property
    def input_timestamp(self) -> Timestamp:
        """Timestamp of the current input set; UNSTARTED in open(), DONE in close()."""
        return Timestamp(self._input_timestamp)

    @overload
    def options(self) -> Message: ...
    @overload
    def options(self, message_type: type[M]) -> M: ...
    def options(self, message_type: type[Message] | None = None) -> Message:
        """Node options of `message_type` (default: the calculator's `options_type`).

        A type the node config does not carry yields the message with its defaults, as protobuf
        accessors do, so calculators need no None checks.
        """
        if message_type is None:
            if self._options_type is None:
                raise GraphError(f"{self.calculator_type} declares no options_type")
            message_type = self._options_type
        decoded = self._options(message_type)
        return decoded if decoded is not None else message_type()

    def service(self, service: GraphService[T]) -> T:
        """The object the application provided for `service` (declared in the contract)."""
        try:
            value: T = self._services[service]
        except KeyError:
            raise GraphError(
                f'{self.calculator_type} asked for service "{service.name}", which this graph run '
                "does not provide (declare it with cc.use_service in get_contract)"
            ) from None
        return value

    def has_service(self, service: GraphService[Any]) -> bool:
        return service in self._services

    def detach(self) -> None:
        """Cut the references back to the run once it has finished (`GraphRun._release`): the
        output handles keep only the last input timestamp, and output side packets can no
        longer be set. A calculator may keep its context; the run is freed all the same."""
        state = _DetachedEmitState(self._input_timestamp)
        for handle in self.outputs.handles:
            handle._context = state
        self.output_side_packets.detach()

    def flush_buffer(self) -> None:
        """Deliver outputs buffered while running on a worker thread (event loop only)."""
        buffer, self._buffer = self._buffer, None
        if not buffer:
            return
        for stream, item in buffer:
            if isinstance(item, Packet):
                stream.add(item)
            else:
                stream.raise_bound(item)


__all__ = [
    "CalculatorContext",
    "InputPackets",
    "InputSidePackets",
    "OutputSidePackets",
    "OutputStreamHandle",
    "OutputStreams",
    "StreamError",
]
