from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class OpenVINOModelServerSessionCalculatorOptions(_message.Message):
    __slots__ = ("servable_name", "servable_version", "service_url", "server_config", "log_level")
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    SERVABLE_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVABLE_VERSION_FIELD_NUMBER: _ClassVar[int]
    SERVICE_URL_FIELD_NUMBER: _ClassVar[int]
    SERVER_CONFIG_FIELD_NUMBER: _ClassVar[int]
    LOG_LEVEL_FIELD_NUMBER: _ClassVar[int]
    servable_name: str
    servable_version: str
    service_url: str
    server_config: str
    log_level: str
    def __init__(self, servable_name: _Optional[str] = ..., servable_version: _Optional[str] = ..., service_url: _Optional[str] = ..., server_config: _Optional[str] = ..., log_level: _Optional[str] = ...) -> None: ...

class OpenVINOInferenceCalculatorOptions(_message.Message):
    __slots__ = ("tag_to_input_tensor_names", "tag_to_output_tensor_names", "input_order_list", "output_order_list")
    class TagToInputTensorNamesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class TagToOutputTensorNamesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    TAG_TO_INPUT_TENSOR_NAMES_FIELD_NUMBER: _ClassVar[int]
    TAG_TO_OUTPUT_TENSOR_NAMES_FIELD_NUMBER: _ClassVar[int]
    INPUT_ORDER_LIST_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_ORDER_LIST_FIELD_NUMBER: _ClassVar[int]
    tag_to_input_tensor_names: _containers.ScalarMap[str, str]
    tag_to_output_tensor_names: _containers.ScalarMap[str, str]
    input_order_list: _containers.RepeatedScalarFieldContainer[str]
    output_order_list: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tag_to_input_tensor_names: _Optional[_Mapping[str, str]] = ..., tag_to_output_tensor_names: _Optional[_Mapping[str, str]] = ..., input_order_list: _Optional[_Iterable[str]] = ..., output_order_list: _Optional[_Iterable[str]] = ...) -> None: ...
