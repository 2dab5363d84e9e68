from graphruntime._proto import mediapipe_options_pb2 as _mediapipe_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusHandlerConfig(_message.Message):
    __slots__ = ("status_handler", "input_side_packet", "external_input", "options")
    STATUS_HANDLER_FIELD_NUMBER: _ClassVar[int]
    INPUT_SIDE_PACKET_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_INPUT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    status_handler: str
    input_side_packet: _containers.RepeatedScalarFieldContainer[str]
    external_input: _containers.RepeatedScalarFieldContainer[str]
    options: _mediapipe_options_pb2.MediaPipeOptions
    def __init__(self, status_handler: _Optional[str] = ..., input_side_packet: _Optional[_Iterable[str]] = ..., external_input: _Optional[_Iterable[str]] = ..., options: _Optional[_Union[_mediapipe_options_pb2.MediaPipeOptions, _Mapping]] = ...) -> None: ...
