from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class S2tCalculatorOptions(_message.Message):
    __slots__ = ("models_path", "target_device", "plugin_config", "enable_word_timestamps")
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    ENABLE_WORD_TIMESTAMPS_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    target_device: str
    plugin_config: str
    enable_word_timestamps: bool
    def __init__(self, models_path: _Optional[str] = ..., target_device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., enable_word_timestamps: _Optional[bool] = ...) -> None: ...
