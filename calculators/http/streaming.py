"""HttpStreamCalculator: the shape of a node that answers an HTTP request, once or as a stream.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"      (and "LOOPBACK:loopback", optional or not)
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"   (and "LOOPBACK:loopback")
    input_stream_info: { tag_index: 'LOOPBACK:0', back_edge: true }

A subclass writes `replies`: an async generator of what to send for one request (one reply for a
unary answer; a stream's steps one by one). The base runs it as OVMS's HttpLLMCalculator runs a
generation: the request packet starts it and emits its first reply with a LOOPBACK packet, which
the back edge brings back (in its own sync set of the SyncSet handler) to trigger the next call,
one reply per call, so every step of a stream is a call on the graph page. A reply that ends the
answer (`is_last`) goes out without LOOPBACK, which ends the cycle; so does an exhausted
generator. A graph without the LOOPBACK edge (OVMS's image graph has none) gets every reply from
the one call, as it comes, which graphrt's runtime delivers at once.

A client that goes away is seen before each step and ends the cycle; closing the node (the run is
cancelled or over) closes the generator, whose own `finally` blocks release what it holds (an
engine request, a pipeline job).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any, ClassVar

from calculators.http.payload import REQUEST, RESPONSE, HttpPayload
from calculators.http.replies import Reply, SseEvents
from calculators.loopback import LOOPBACK, loopback_sync_sets
from graphruntime import Calculator, CalculatorContext, CalculatorContract


class HttpStreamCalculator(Calculator):
    """See the module docstring. Subclasses implement `replies`; `is_last` may be refined."""

    blocking = False  # process() is async; engines and pipelines run elsewhere
    loopback_required: ClassVar[bool] = False

    @classmethod
    def declare_http_streams(cls, cc: CalculatorContract) -> None:
        """The request, reply and LOOPBACK ports, and the SyncSet handler the cycle needs."""
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(RESPONSE, object)
        optional = not cls.loopback_required
        cc.inputs.declare(LOOPBACK, bool, optional=optional)
        cc.outputs.declare(LOOPBACK, bool, optional=optional)
        if cc.inputs.has_tag(LOOPBACK):
            # OVMS's graphs name this handler themselves; this default keeps graphs that forget
            # it alive.
            cc.set_input_stream_handler("SyncSetInputStreamHandler", loopback_sync_sets())

    def open(self, cc: CalculatorContext) -> None:
        self.cycles = cc.outputs.has_tag(LOOPBACK)
        self.pending: AsyncGenerator[Reply, None] | None = None
        self.payload: HttpPayload | None = None
        self.timestamp = 0

    def replies(self, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        """What to send for `payload`: one reply, or a stream's steps in order."""
        raise NotImplementedError

    def is_last(self, reply: Reply) -> bool:
        """Whether `reply` ends the answer: a unary reply, or a stream step ending in `[DONE]`.
        Otherwise the generator's end ends it (one call later)."""
        if isinstance(reply, SseEvents):
            return bool(reply.events) and reply.events[-1].done
        return not isinstance(reply, bytes)

    async def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[REQUEST]
        if not packet.is_empty():
            self.payload = packet.payload
            replies = self.replies(packet.payload)
            if not self.cycles:
                async with aclosing(replies) as each:
                    async for reply in each:
                        self.emit(cc, reply, more=False)
                return
            self.pending = replies
            await self._step(cc)
        elif self.pending is not None:
            await self._step(cc)

    async def _step(self, cc: CalculatorContext) -> None:
        """One reply per call over the LOOPBACK edge; none, and no LOOPBACK, at the end."""
        assert self.pending is not None
        client = self.payload.client if self.payload else None
        if client is not None and client.is_disconnected():
            await self.abandon()
            return
        try:
            reply = await anext(self.pending)
        except StopAsyncIteration:
            self.pending = None
            return
        last = self.is_last(reply)
        self.emit(cc, reply, more=not last)
        if last:
            await self.abandon()

    def emit(self, cc: CalculatorContext, reply: Any, more: bool) -> None:
        cc.outputs[RESPONSE].add(reply, self.timestamp)
        if more:
            cc.outputs[LOOPBACK].add(True, self.timestamp)
        self.timestamp += 1

    async def abandon(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            await pending.aclose()

    async def close(self, cc: CalculatorContext) -> None:
        await self.abandon()
