from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class T2sCalculatorOptions(_message.Message):
    __slots__ = ("models_path", "target_device", "plugin_config", "voices", "speed_min", "speed_max")
    class SpeakerEmbeddings(_message.Message):
        __slots__ = ("name", "path")
        NAME_FIELD_NUMBER: _ClassVar[int]
        PATH_FIELD_NUMBER: _ClassVar[int]
        name: str
        path: str
        def __init__(self, name: _Optional[str] = ..., path: _Optional[str] = ...) -> None: ...
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    VOICES_FIELD_NUMBER: _ClassVar[int]
    SPEED_MIN_FIELD_NUMBER: _ClassVar[int]
    SPEED_MAX_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    target_device: str
    plugin_config: str
    voices: _containers.RepeatedCompositeFieldContainer[T2sCalculatorOptions.SpeakerEmbeddings]
    speed_min: float
    speed_max: float
    def __init__(self, models_path: _Optional[str] = ..., target_device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., voices: _Optional[_Iterable[_Union[T2sCalculatorOptions.SpeakerEmbeddings, _Mapping]]] = ..., speed_min: _Optional[float] = ..., speed_max: _Optional[float] = ...) -> None: ...
