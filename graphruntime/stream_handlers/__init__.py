"""Built-in input stream handlers, registered under MediaPipe's names."""

from graphruntime.stream_handlers.barrier import (
    BarrierInputStreamHandler,
    EarlyCloseInputStreamHandler,
)
from graphruntime.stream_handlers.base import (
    NOT_READY,
    READY_FOR_CLOSE,
    InputStreamHandler,
    SyncSet,
)
from graphruntime.stream_handlers.default import DefaultInputStreamHandler
from graphruntime.stream_handlers.fixed_size import FixedSizeInputStreamHandler
from graphruntime.stream_handlers.immediate import ImmediateInputStreamHandler
from graphruntime.stream_handlers.mux import MuxInputStreamHandler
from graphruntime.stream_handlers.sync_set import SyncSetInputStreamHandler

BUILTIN_HANDLERS: tuple[type[InputStreamHandler], ...] = (
    DefaultInputStreamHandler,
    ImmediateInputStreamHandler,
    SyncSetInputStreamHandler,
    FixedSizeInputStreamHandler,
    MuxInputStreamHandler,
    BarrierInputStreamHandler,
    EarlyCloseInputStreamHandler,
)

__all__ = [
    "BUILTIN_HANDLERS",
    "NOT_READY",
    "READY_FOR_CLOSE",
    "BarrierInputStreamHandler",
    "DefaultInputStreamHandler",
    "EarlyCloseInputStreamHandler",
    "FixedSizeInputStreamHandler",
    "ImmediateInputStreamHandler",
    "InputStreamHandler",
    "MuxInputStreamHandler",
    "SyncSet",
    "SyncSetInputStreamHandler",
]
