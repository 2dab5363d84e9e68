from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GateCalculatorOptions(_message.Message):
    __slots__ = ("empty_packets_as_allow", "allow", "initial_gate_state")
    class GateState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNSPECIFIED: _ClassVar[GateCalculatorOptions.GateState]
        GATE_UNINITIALIZED: _ClassVar[GateCalculatorOptions.GateState]
        GATE_ALLOW: _ClassVar[GateCalculatorOptions.GateState]
        GATE_DISALLOW: _ClassVar[GateCalculatorOptions.GateState]
    UNSPECIFIED: GateCalculatorOptions.GateState
    GATE_UNINITIALIZED: GateCalculatorOptions.GateState
    GATE_ALLOW: GateCalculatorOptions.GateState
    GATE_DISALLOW: GateCalculatorOptions.GateState
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    EMPTY_PACKETS_AS_ALLOW_FIELD_NUMBER: _ClassVar[int]
    ALLOW_FIELD_NUMBER: _ClassVar[int]
    INITIAL_GATE_STATE_FIELD_NUMBER: _ClassVar[int]
    empty_packets_as_allow: bool
    allow: bool
    initial_gate_state: GateCalculatorOptions.GateState
    def __init__(self, empty_packets_as_allow: _Optional[bool] = ..., allow: _Optional[bool] = ..., initial_gate_state: _Optional[_Union[GateCalculatorOptions.GateState, str]] = ...) -> None: ...
