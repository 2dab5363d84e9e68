from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class PythonExecutorCalculatorOptions(_message.Message):
    __slots__ = ("handler_path",)
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    HANDLER_PATH_FIELD_NUMBER: _ClassVar[int]
    handler_path: str
    def __init__(self, handler_path: _Optional[str] = ...) -> None: ...

class PyTensorOvTensorConverterCalculatorOptions(_message.Message):
    __slots__ = ("tag_to_output_tensor_names",)
    class TagToOutputTensorNamesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    TAG_TO_OUTPUT_TENSOR_NAMES_FIELD_NUMBER: _ClassVar[int]
    tag_to_output_tensor_names: _containers.ScalarMap[str, str]
    def __init__(self, tag_to_output_tensor_names: _Optional[_Mapping[str, str]] = ...) -> None: ...
