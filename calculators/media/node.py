"""MediaCalculator: the shape OVMS's image and audio calculators share.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"      (and optionally "LOOPBACK:loopback")
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"   (and optionally "LOOPBACK:loopback")
    input_side_packet: "<KIND>_NODE_RESOURCES:..."  the servable, keyed by node name

A request packet in; its answer out: one JSON body (or audio bytes with their content type),
or, when the request streams, its server-sent events one packet at a time. With a LOOPBACK back
edge (OVMS's speech-to-text graph has one) each event is one process() call, re-triggered
through the back edge as HttpLLMCalculator's chunks are, so every event is a call on the graph
page; without one (OVMS's image graph) the events are emitted from the one call as they come,
which graphrt's runtime delivers at once. Either way, a client that goes away cancels the run,
which closes the servable's iterator and cancels its job at the next pipeline step.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, ClassVar

from calculators.llm.payload import HttpPayload, HttpReply
from calculators.node_resources import node_servable
from graphruntime import Calculator, CalculatorContext, CalculatorContract
from graphruntime._proto.stream_handler_options_pb2 import SyncSetInputStreamHandlerOptions
from servables.errors import InvalidRequest

REQUEST = "HTTP_REQUEST_PAYLOAD"
RESPONSE = "HTTP_RESPONSE_PAYLOAD"
LOOPBACK = "LOOPBACK"

Chunk = bytes | HttpReply


class MediaCalculator(Calculator):
    """Subclasses set `options_type`, `resources`, `kind`, `endpoints` and `servable_type`,
    and implement `answer`."""

    blocking = False  # process() is async; the pipelines run on their servable's thread
    resources: ClassVar[str]  # the side packet's tag, e.g. "IMAGE_GEN_NODE_RESOURCES"
    kind: ClassVar[str]  # in OVMS's "Could not find initialized <kind> node" message
    endpoints: ClassVar[tuple[str, ...]]  # path tails it answers, e.g. ("/images/generations",)
    servable_type: ClassVar[type]

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(RESPONSE, object)
        cc.inputs.declare(LOOPBACK, bool, optional=True)
        cc.outputs.declare(LOOPBACK, bool, optional=True)
        cc.input_side_packets.declare(cls.resources, dict)
        if cc.inputs.has_tag(LOOPBACK):
            options = SyncSetInputStreamHandlerOptions()
            options.sync_set.add().tag_index.append("LOOPBACK:0")
            cc.set_input_stream_handler("SyncSetInputStreamHandler", options)
        assert cls.options_type is not None
        if cc.options(cls.options_type) is None:
            raise ValueError(f"node_options must carry {cls.options_type.DESCRIPTOR.full_name}")

    def open(self, cc: CalculatorContext) -> None:
        self.servable: Any = node_servable(cc, self.resources, self.servable_type, self.kind)
        self.loopback = cc.outputs.has_tag(LOOPBACK)
        self.chunks: AsyncGenerator[Chunk, None] | None = None
        self.payload: HttpPayload | None = None
        self.timestamp = 0

    async def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[REQUEST]
        if not packet.is_empty():
            payload: HttpPayload = packet.payload
            path = payload.uri.split("?", 1)[0].rstrip("/")
            endpoint = next((tail for tail in self.endpoints if path.endswith(tail)), None)
            if endpoint is None:
                raise InvalidRequest(f"Unsupported URI: {payload.uri}")
            self.payload = payload
            self.chunks = self.answer(endpoint, payload)
            if not self.loopback:
                async with aclosing(self.chunks) as chunks:
                    async for chunk in chunks:
                        self._emit(cc, chunk, more=False)
                self.chunks = None
                return
        if self.chunks is not None:
            await self._next(cc)

    async def _next(self, cc: CalculatorContext) -> None:
        """One chunk per call over the LOOPBACK edge; none, and no LOOPBACK, at the end."""
        assert self.chunks is not None
        client = self.payload.client if self.payload else None
        if client is not None and client.is_disconnected():
            await self.close(cc)
            return
        try:
            chunk = await anext(self.chunks)
        except StopAsyncIteration:
            self.chunks = None
            return
        self._emit(cc, chunk, more=True)

    def _emit(self, cc: CalculatorContext, chunk: Chunk, more: bool) -> None:
        cc.outputs[RESPONSE].add(chunk, self.timestamp)
        if more:
            cc.outputs[LOOPBACK].add(True, self.timestamp)
        self.timestamp += 1

    def answer(self, endpoint: str, payload: HttpPayload) -> AsyncGenerator[Chunk, None]:
        """The response to a request sent to `endpoint`: one chunk, or SSE frames when the
        request streams."""
        raise NotImplementedError

    async def close(self, cc: CalculatorContext) -> None:
        chunks, self.chunks = self.chunks, None
        if chunks is not None:
            await chunks.aclose()
