"""KServe requests to graphs: tensors in as packets on input streams, packets out as tensors.

As in OVMS, a request's inputs go to the graph input streams of the same names and its outputs
come from the graph output streams of the same names. The stream's tag says what a calculator
receives: a tag starting with OVTENSOR gets an `openvino.Tensor`, OVMS_PY_TENSOR a
`pyovms.Tensor` (python_tensors.py), REQUEST the whole `InferRequest`, anything else (TENSOR, no
tag, ...) a numpy array. Either way the tensor's memory is the request's buffer, not a copy. An
output on a RESPONSE stream is a ready `InferResponse`; a `pyovms.Tensor` goes out under its own
name, datatype and shape.
Request parameters become input side packets of the run (OVMS's behaviour), except
OVMS_MP_TIMESTAMP, which sets the packets' timestamp.

Unary requests run the graph once and answer with the first packet of each output stream.
A ModelStreamInfer stream runs the graph once for the whole stream: every request adds packets
(at the next timestamp unless it gives one) and every output packet goes back as a response as
soon as it is produced, so a graph can answer one request many times or many requests once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from calculators.http.payload import REQUEST as HTTP_REQUEST_TAG
from graphrt.kserve import python_tensors
from graphrt.kserve.types import (
    InferRequest,
    InferResponse,
    InferTensor,
    tensor_from,
)
from graphrt.serving.graph_servable import GraphServable
from graphruntime.errors import GraphError, PacketError
from graphruntime.graph import Graph
from graphruntime.packet import Packet
from graphruntime.validation import ValidatedGraph
from servables.errors import InvalidRequest, ServableError
from servables.io.request_fields import is_integer
from servables.python_model.tensor import Tensor

logger = logging.getLogger(__name__)

TIMESTAMP_PARAMETER = "OVMS_MP_TIMESTAMP"
REQUEST_TAG = "REQUEST"
RESPONSE_TAG = "RESPONSE"
# Request ids a stream remembers to label its responses (by the packets' timestamps).
REMEMBERED_IDS = 1024


@dataclass(frozen=True)
class GraphPorts:
    """A graph's input and output streams by name, with their tags."""

    inputs: dict[str, str]
    outputs: dict[str, str]

    @classmethod
    def of(cls, graph: ValidatedGraph) -> GraphPorts:
        return cls(
            {name: tag for tag, _, name in graph.input_streams.items()},
            {name: tag for tag, _, name in graph.output_streams.items()},
        )


def ports_of(servable: GraphServable) -> GraphPorts:
    servable.check_ready()
    assert servable.graph is not None
    ports = GraphPorts.of(servable.graph)
    if HTTP_REQUEST_TAG in ports.inputs.values():
        raise InvalidRequest(
            f"Graph {servable.name} serves the OpenAI API (it takes HTTP requests), not KServe "
            "inference requests"
        )
    return ports


def input_payload(tag: str, tensor: InferTensor) -> Any:
    if python_tensors.is_python_tag(tag):
        return python_tensors.to_python(tensor)
    if tag.startswith("OVTENSOR") and tensor.datatype != "BYTES":
        import openvino

        return openvino.Tensor(tensor.data, shared_memory=True)
    return tensor.data


def output_tensor(graph_name: str, stream: str, payload: Any) -> InferTensor:
    if isinstance(payload, Tensor):  # a Python node's: its own name, datatype and shape
        return python_tensors.from_python(payload)
    try:
        return tensor_from(stream, payload)
    except (TypeError, ValueError) as error:
        raise ServableError(
            f"Graph {graph_name} produced a packet on output stream {stream} that is not a "
            f"tensor ({type(payload).__name__}): {error}"
        ) from error


def packet_timestamp(request: InferRequest, default: int) -> int:
    if TIMESTAMP_PARAMETER not in request.parameters:
        return default
    value = request.parameters[TIMESTAMP_PARAMETER]
    if not is_integer(value):
        raise InvalidRequest(
            f"Invalid timestamp format in request parameter {TIMESTAMP_PARAMETER}. Should be int64"
        )
    return value


def side_packets(servable: GraphServable, request: InferRequest) -> dict[str, Any]:
    """The servable's side packets plus the request's parameters (strings, ints, bools)."""
    assert servable.graph is not None
    packets = dict(servable.side_packets)
    for name, value in request.parameters.items():
        if name == TIMESTAMP_PARAMETER:
            continue
        if name in packets or name in servable.graph.side_packet_producers:
            raise InvalidRequest(
                f"Request parameter {name} names a side packet the server or the graph "
                "provides; choose another name"
            )
        if not isinstance(value, (str, int, bool)):
            raise InvalidRequest(
                f"Request parameter {name} must be a string, int64 or bool to become a side packet"
            )
        packets[name] = value
    for name, required in servable.graph.external_side_packets.items():
        if required and name not in packets:
            raise InvalidRequest(
                f"Graph {servable.name} needs side packet {name}; pass it as a request parameter",
                param=name,
            )
    return packets


def input_packets(
    ports: GraphPorts, request: InferRequest, graph_name: str, *, complete: bool
) -> list[tuple[str, Any]]:
    """(stream, payload) for each input; `complete` requires every graph input (unary)."""
    packets: list[tuple[str, Any]] = []
    given: set[str] = set()
    for stream, tag in ports.inputs.items():
        if tag == REQUEST_TAG:
            packets.append((stream, request))
            given.add(stream)
    takes_request = bool(packets)
    for tensor in request.inputs:
        stream_tag = ports.inputs.get(tensor.name)
        if stream_tag is None and takes_request:
            continue  # it reaches the graph inside the request on the REQUEST stream
        if stream_tag is None or stream_tag == REQUEST_TAG:
            takes = ", ".join(n for n, t in ports.inputs.items() if t != REQUEST_TAG) or "none"
            raise InvalidRequest(
                f"Unexpected input: {tensor.name}; graph {graph_name} takes {takes}",
                param=tensor.name,
            )
        if tensor.name in given:
            raise InvalidRequest(f"Input {tensor.name} is given twice", param=tensor.name)
        given.add(tensor.name)
        packets.append((tensor.name, input_payload(stream_tag, tensor)))
    missing = [name for name in ports.inputs if name not in given]
    if complete and missing:
        raise InvalidRequest(f"Missing input: {missing[0]}", param=missing[0])
    if not packets:
        raise InvalidRequest("The request has no inputs")
    return packets


def wanted_outputs(ports: GraphPorts, request: InferRequest, graph_name: str) -> list[str]:
    for name in request.outputs:
        if name not in ports.outputs:
            raise InvalidRequest(
                f"Unexpected output: {name}; graph {graph_name} produces "
                + ", ".join(ports.outputs),
                param=name,
            )
    return list(request.outputs) or list(ports.outputs)


def response_for(
    servable: GraphServable,
    ports: GraphPorts,
    request_id: str,
    outputs: list[tuple[str, Packet[Any]]],
) -> InferResponse:
    """One response from (stream, packet) pairs; a RESPONSE packet is the response itself."""
    version = str(servable.definition.version)
    tensors: list[InferTensor] = []
    for stream, packet in outputs:
        if ports.outputs.get(stream) == RESPONSE_TAG:
            response = packet.payload
            if not isinstance(response, InferResponse):
                raise ServableError(
                    f"Graph {servable.name} put a {type(response).__name__} on RESPONSE stream "
                    f"{stream}; it must be an InferResponse"
                )
            response.model = response.model or servable.name
            response.version = response.version or version
            return response
        tensors.append(output_tensor(servable.name, stream, packet.payload))
    timestamp = int(outputs[0][1].timestamp) if outputs else 0
    return InferResponse(
        servable.name, version, request_id, tensors, {TIMESTAMP_PARAMETER: timestamp}
    )


async def add_packets(graph: Graph, packets: list[tuple[str, Any]], timestamp: int) -> None:
    """A request's packets at its timestamp; a timestamp the graph refuses (not increasing,
    out of range) is the client's mistake."""
    try:
        for stream, payload in packets:
            await graph.add_packet(stream, Packet(payload, timestamp))
    except PacketError as error:
        raise InvalidRequest(error.message) from error


async def run_once(
    servable: GraphServable,
    packets: list[tuple[str, Any]],
    outputs: list[str],
    side_packets: dict[str, Any],
    timestamp: int = 0,
) -> list[tuple[str, Packet[Any]]]:
    """One run of the graph: the packets in at `timestamp`, the first packet of each output."""
    async with servable.graph_run() as graph:
        pollers = {name: graph.poll_output_stream(name) for name in outputs}
        await graph.start_run(side_packets)
        await add_packets(graph, packets, timestamp)
        graph.close_all_packet_sources()
        results: list[tuple[str, Packet[Any]]] = []
        for name, poller in pollers.items():
            packet = await anext(poller, None)
            if packet is None:
                await graph.wait_until_done()  # raises the run's error, if that is the reason
                raise ServableError(
                    f"Graph {servable.name} produced no packet on output stream {name}"
                )
            results.append((name, packet))
        await graph.wait_until_done()
    return results


async def infer(servable: GraphServable, request: InferRequest) -> InferResponse:
    """Run the graph once for a unary request."""
    ports = ports_of(servable)
    packets = input_packets(ports, request, servable.name, complete=True)
    outputs = wanted_outputs(ports, request, servable.name)
    timestamp = packet_timestamp(request, 0)
    results = await run_once(servable, packets, outputs, side_packets(servable, request), timestamp)
    return response_for(servable, ports, request.id, results)


StreamItem = InferResponse | ServableError | GraphError


class GraphStream:
    """One ModelStreamInfer call on a graph; see the module docstring."""

    def __init__(self, servable: GraphServable, first: InferRequest) -> None:
        self.servable = servable
        self.first = first
        self.ports = ports_of(servable)
        self.outputs = wanted_outputs(self.ports, first, servable.name)
        self.items: asyncio.Queue[StreamItem | None] = asyncio.Queue()
        self.request_ids: dict[int, str] = {}
        self.next_timestamp = 0

    def _on_packet(self, stream: str, packet: Packet[Any]) -> None:
        request_id = self.request_ids.get(int(packet.timestamp), "")
        try:
            response = response_for(self.servable, self.ports, request_id, [(stream, packet)])
        except ServableError as error:
            self.items.put_nowait(error)
        else:
            self.items.put_nowait(response)

    async def _add(self, graph: Graph, request: InferRequest) -> None:
        if request.model != self.first.model or request.version != self.first.version:
            raise InvalidRequest(
                "Every request of a stream must name the same model and version as the first "
                f"({self.first.model!r}, version {self.first.version!r})"
            )
        packets = input_packets(self.ports, request, self.servable.name, complete=False)
        timestamp = packet_timestamp(request, self.next_timestamp)
        # Recorded before the packets go in (outputs can follow at once); a refused request (a
        # timestamp already used) must not relabel the outputs of the one that used it.
        previous = self.request_ids.get(timestamp)
        self.request_ids[timestamp] = request.id
        if len(self.request_ids) > REMEMBERED_IDS:  # a long stream must not grow without bound
            del self.request_ids[next(iter(self.request_ids))]
        try:
            await add_packets(graph, packets, timestamp)
        except InvalidRequest:
            if previous is None:
                self.request_ids.pop(timestamp, None)
            else:
                self.request_ids[timestamp] = previous
            raise
        self.next_timestamp = timestamp + 1

    async def _feed(
        self, graph: Graph, requests: AsyncIterator[InferRequest | ServableError]
    ) -> None:
        try:
            await self._add_or_report(graph, self.first)
            async for request in requests:
                await self._add_or_report(graph, request)
        finally:
            if graph.running and not graph.has_error:
                graph.close_all_packet_sources()

    async def _add_or_report(self, graph: Graph, request: InferRequest | ServableError) -> None:
        try:
            if isinstance(request, ServableError):
                raise request  # a message the transport could not decode
            await self._add(graph, request)
        except ServableError as error:
            self.items.put_nowait(error)  # this request is refused; the stream goes on

    async def _watch(self, graph: Graph) -> None:
        try:
            await graph.wait_until_done()
        except GraphError as error:
            self.items.put_nowait(error)
        self.items.put_nowait(None)

    async def responses(
        self, requests: AsyncIterator[InferRequest | ServableError]
    ) -> AsyncIterator[StreamItem]:
        async with self.servable.graph_run() as graph:
            for name in self.outputs:
                graph.observe_output_stream(name, self._on_packet)
            await graph.start_run(side_packets(self.servable, self.first))
            feeder = asyncio.create_task(self._feed(graph, requests))
            watcher = asyncio.create_task(self._watch(graph))
            try:
                while (item := await self.items.get()) is not None:
                    yield item
                    if isinstance(item, GraphError):
                        break
            finally:
                for task in (feeder, watcher):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, GraphError, ServableError):
                        await task
