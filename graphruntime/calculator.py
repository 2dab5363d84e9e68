"""The Calculator base class: a static contract plus open / process / close.

A calculator declares its ports (as class attributes, or in `get_contract` when they depend on
the node config) and implements up to three hooks. Each hook may be a plain method or `async def`.
Plain `process` methods are assumed to block (file I/O, a model call) and run on a worker thread
unless the class sets `blocking = False`, so a slow calculator never stalls the event loop that
also serves HTTP. A fresh instance is made for every graph run; keep expensive state in side
packets.

Quick start::

    from graphruntime import Calculator, CalculatorContext, Input, Output, register_calculator

    @register_calculator
    class UppercaseCalculator(Calculator):
        '''node { calculator: "UppercaseCalculator"
                  input_stream: "TEXT:a" output_stream: "TEXT:b" }'''

        text_in = Input("TEXT", str)
        text_out = Output("TEXT", str)
        blocking = False  # cheap: run inline on the scheduler

        def process(self, cc: CalculatorContext) -> None:
            cc.outputs[self.text_out].add(cc.inputs[self.text_in].payload.upper())
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, overload

from google.protobuf.message import Message

from graphruntime.errors import GraphError

if TYPE_CHECKING:
    from graphruntime.context import CalculatorContext
    from graphruntime.contract import CalculatorContract, PortCollection

T = TypeVar("T")


class StatusStop(GraphError):
    """Raised by process(): a source is exhausted, or a non-source asks the graph to wind down.

    A source node that raises it is closed. A non-source that raises it closes every graph input
    and source; queued packets still drain and the run ends normally.
    """

    def __init__(self, message: str = "stop") -> None:
        super().__init__(message)


class Port(Generic[T]):
    """A port declared as a class attribute; also a typed key into `cc.inputs` / `cc.outputs`."""

    collection: ClassVar[str] = ""

    # The overloads let type checkers infer T from a class (`Input("TEXT", str)` is an
    # Input[str]) and fall back to Any for no type or a non-class one (a union, Any).
    @overload
    def __init__(
        self, tag: str, payload_type: type[T], *, index: int = 0, optional: bool = False
    ) -> None: ...
    @overload
    def __init__(
        self: Port[Any],
        tag: str = "",
        payload_type: Any = object,
        *,
        index: int = 0,
        optional: bool = False,
    ) -> None: ...
    def __init__(
        self,
        tag: str = "",
        payload_type: type[T] | Any = object,
        *,
        index: int = 0,
        optional: bool = False,
    ) -> None:
        self.tag = tag
        self.payload_type = payload_type
        self.index = index
        self.optional = optional

    def declare(self, contract: CalculatorContract) -> None:
        ports: PortCollection = getattr(contract, self.collection)
        ports.declare(self.tag, self.payload_type, index=self.index, optional=self.optional)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tag!r}, index={self.index})"


class Input(Port[T]):
    collection = "inputs"


class Output(Port[T]):
    collection = "outputs"


class InputSidePacket(Port[T]):
    collection = "input_side_packets"


class OutputSidePacket(Port[T]):
    collection = "output_side_packets"


class Calculator:
    """Base class of every node's implementation; see the module docstring for an example."""

    # Options message the node config carries for this calculator (decoded by cc.options()).
    options_type: ClassVar[type[Message] | None] = None
    # Sync process() may block and then runs on a worker thread; False runs it inline.
    blocking: ClassVar[bool] = True
    # Contract defaults used by the default get_contract().
    input_stream_handler: ClassVar[str | None] = None
    timestamp_offset: ClassVar[int | None] = None
    process_timestamp_bounds: ClassVar[bool] = False

    _ports: ClassVar[tuple[Port[Any], ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        ports: dict[str, Port[Any]] = {}
        for klass in reversed(cls.__mro__):
            for name, value in vars(klass).items():
                if isinstance(value, Port):
                    ports[name] = value
        cls._ports = tuple(ports.values())

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        """Declare ports and preferences; the default declares the class-attribute ports."""
        for port in cls._ports:
            port.declare(cc)
        if cls.input_stream_handler:
            cc.set_input_stream_handler(cls.input_stream_handler)
        if cls.timestamp_offset is not None:
            cc.set_timestamp_offset(cls.timestamp_offset)
        if cls.process_timestamp_bounds:
            cc.set_process_timestamp_bounds(True)

    def open(self, cc: CalculatorContext) -> Awaitable[None] | None:
        """Called once per run before any process(); side packets are available here."""
        return None

    def process(self, cc: CalculatorContext) -> Awaitable[None] | None:
        """Called for each input set (or repeatedly, for a source, until it raises StatusStop)."""
        return None

    def close(self, cc: CalculatorContext) -> Awaitable[None] | None:
        """Called once when all inputs are done, or when the run ends; also after errors."""
        return None


def hook_is_async(calculator: type[Calculator], hook: str) -> bool:
    return inspect.iscoroutinefunction(getattr(calculator, hook))
