from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmbeddingsCalculatorOVOptions(_message.Message):
    __slots__ = ("models_path", "normalize_embeddings", "target_device", "plugin_config", "pooling", "truncate", "max_batch_size", "batch_window_us", "max_batch_tokens", "max_inputs")
    class Pooling(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CLS: _ClassVar[EmbeddingsCalculatorOVOptions.Pooling]
        LAST: _ClassVar[EmbeddingsCalculatorOVOptions.Pooling]
        MEAN: _ClassVar[EmbeddingsCalculatorOVOptions.Pooling]
    CLS: EmbeddingsCalculatorOVOptions.Pooling
    LAST: EmbeddingsCalculatorOVOptions.Pooling
    MEAN: EmbeddingsCalculatorOVOptions.Pooling
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    NORMALIZE_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    POOLING_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BATCH_WINDOW_US_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUTS_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    normalize_embeddings: bool
    target_device: str
    plugin_config: str
    pooling: EmbeddingsCalculatorOVOptions.Pooling
    truncate: bool
    max_batch_size: int
    batch_window_us: int
    max_batch_tokens: int
    max_inputs: int
    def __init__(self, models_path: _Optional[str] = ..., normalize_embeddings: _Optional[bool] = ..., target_device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., pooling: _Optional[_Union[EmbeddingsCalculatorOVOptions.Pooling, str]] = ..., truncate: _Optional[bool] = ..., max_batch_size: _Optional[int] = ..., batch_window_us: _Optional[int] = ..., max_batch_tokens: _Optional[int] = ..., max_inputs: _Optional[int] = ...) -> None: ...
