from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class DemultiplexCalculatorOptions(_message.Message):
    __slots__ = ("demultiply_count",)
    DEMULTIPLY_COUNT_FIELD_NUMBER: _ClassVar[int]
    demultiply_count: int
    def __init__(self, demultiply_count: _Optional[int] = ...) -> None: ...
