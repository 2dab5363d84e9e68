"""EncoderCalculator: the shape OVMS's embeddings and rerank calculators share.

One REQUEST_PAYLOAD packet in, one RESPONSE_PAYLOAD JSON reply out; the servable comes from the
node's resources side packet, keyed by node name; `/tokenize` is answered by the servable's
tokenizer, the model's own endpoint by the subclass's `answer`, any other path is refused.
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, TypeVar

from calculators.http.apis import Api, expect_api
from calculators.http.payload import PAYLOAD_TAGS, HttpPayload, request_body
from calculators.http.replies import JsonReply
from calculators.node_resources import node_servable
from graphruntime import Calculator, CalculatorContext, CalculatorContract
from servables.io.text.tokenize import TokenizeRequest
from servables.openai.tokenize import tokenize_reply

REQUEST, RESPONSE = PAYLOAD_TAGS[1]  # OVMS's encoder graphs: REQUEST_PAYLOAD, RESPONSE_PAYLOAD

S = TypeVar("S")


class EncoderServable(Protocol):
    name: str
    context: int  # the longest input, in tokens (bounds /tokenize's max_length)

    def tokenize(self, request: TokenizeRequest) -> list[list[int]]: ...


class EncoderCalculator(Calculator):
    """Subclasses set `options_type`, `resources`, `kind`, `endpoint` and `model`; they
    implement `open` (with `find_servable`) and `answer`."""

    blocking = False  # process() is async; tokenization and inference run on worker threads
    resources: ClassVar[str]  # the side packet's tag, e.g. "EMBEDDINGS_NODE_RESOURCES"
    kind: ClassVar[str]  # in OVMS's "Could not find initialized <kind> node" message
    endpoint: ClassVar[Api]  # the API the model answers, e.g. Api.EMBEDDINGS
    model: ClassVar[str]  # what the model is, for requests sent to another endpoint
    servable: EncoderServable

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare(REQUEST, HttpPayload)
        cc.outputs.declare(RESPONSE, JsonReply)
        cc.input_side_packets.declare(cls.resources, dict)
        assert cls.options_type is not None
        if cc.options(cls.options_type) is None:
            raise ValueError(f"node_options must carry {cls.options_type.DESCRIPTOR.full_name}")

    def find_servable(self, cc: CalculatorContext, kind: type[S]) -> S:
        """This node's servable, from the resources side packet."""
        return node_servable(cc, self.resources, kind, self.kind)

    async def process(self, cc: CalculatorContext) -> None:
        packet = cc.inputs[REQUEST]
        payload: HttpPayload = packet.payload
        api = expect_api(payload.uri, self.model, Api.TOKENIZE, self.endpoint)
        if api is Api.TOKENIZE:
            reply = await tokenize_reply(
                self.servable.tokenize, request_body(payload), self.servable.context
            )
        else:
            reply = await self.answer(payload.path, request_body(payload))
        cc.outputs[RESPONSE].add(JsonReply(reply), packet.timestamp)

    async def answer(self, path: str, body: Any) -> Any:
        """The JSON answer to a request body sent to the model's own endpoint."""
        raise NotImplementedError
