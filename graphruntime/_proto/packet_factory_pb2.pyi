from google.protobuf.internal import containers as _containers
from google.protobuf.internal import python_message as _python_message
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PacketFactoryOptions(_message.Message):
    __slots__ = ()
    Extensions: _python_message._ExtensionDict
    def __init__(self) -> None: ...

class PacketFactoryConfig(_message.Message):
    __slots__ = ("packet_factory", "output_side_packet", "external_output", "options")
    PACKET_FACTORY_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SIDE_PACKET_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    packet_factory: str
    output_side_packet: str
    external_output: str
    options: PacketFactoryOptions
    def __init__(self, packet_factory: _Optional[str] = ..., output_side_packet: _Optional[str] = ..., external_output: _Optional[str] = ..., options: _Optional[_Union[PacketFactoryOptions, _Mapping]] = ...) -> None: ...

class PacketManagerConfig(_message.Message):
    __slots__ = ("packet",)
    PACKET_FIELD_NUMBER: _ClassVar[int]
    packet: _containers.RepeatedCompositeFieldContainer[PacketFactoryConfig]
    def __init__(self, packet: _Optional[_Iterable[_Union[PacketFactoryConfig, _Mapping]]] = ...) -> None: ...
