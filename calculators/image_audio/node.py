"""ImageAudioCalculator: the shape OVMS's image and audio calculators share.

    input_stream: "HTTP_REQUEST_PAYLOAD:input"      (and optionally "LOOPBACK:loopback")
    output_stream: "HTTP_RESPONSE_PAYLOAD:output"   (and optionally "LOOPBACK:loopback")
    input_side_packet: "<KIND>_NODE_RESOURCES:..."  the servable, keyed by node name

A request packet in; its answer out: one JSON body (or audio bytes with their content type),
or, when the request streams, its server-sent events one packet at a time, over the LOOPBACK
cycle when the graph has the edge (OVMS's speech-to-text graph does) or from the one call
(OVMS's image graph): calculators.http.streaming runs both. A client that goes away cancels the
run, which closes the servable's iterator and cancels its job at the next pipeline step.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, ClassVar

from calculators.http.apis import Api, expect_api
from calculators.http.payload import HttpPayload
from calculators.http.replies import Reply
from calculators.http.streaming import HttpStreamCalculator
from calculators.node_resources import node_servable
from graphruntime import CalculatorContext, CalculatorContract


class ImageAudioCalculator(HttpStreamCalculator):
    """Subclasses set `options_type`, `resources`, `kind`, `apis` and `servable_type`,
    and implement `answer`."""

    resources: ClassVar[str]  # the side packet's tag, e.g. "IMAGE_GEN_NODE_RESOURCES"
    kind: ClassVar[str]  # in OVMS's "Could not find initialized <kind> node" message
    apis: ClassVar[tuple[Api, ...]]  # the APIs it answers, e.g. (Api.IMAGE_GENERATIONS,)
    servable_type: ClassVar[type]

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cls.declare_http_streams(cc)
        cc.input_side_packets.declare(cls.resources, dict)
        assert cls.options_type is not None
        if cc.options(cls.options_type) is None:
            raise ValueError(f"node_options must carry {cls.options_type.DESCRIPTOR.full_name}")

    def open(self, cc: CalculatorContext) -> None:
        super().open(cc)
        self.servable: Any = node_servable(cc, self.resources, self.servable_type, self.kind)

    def replies(self, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        api = expect_api(payload.uri, f"the {self.kind.lower()} model", *self.apis)
        return self.answer(api, payload)

    def answer(self, api: Api, payload: HttpPayload) -> AsyncGenerator[Reply, None]:
        """The response to a request of `api`: one reply, or SSE events when it streams."""
        raise NotImplementedError
