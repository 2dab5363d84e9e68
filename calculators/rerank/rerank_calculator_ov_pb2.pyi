from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RerankCalculatorOVOptions(_message.Message):
    __slots__ = ("models_path", "max_allowed_chunks", "max_position_embeddings", "target_device", "plugin_config", "max_batch_size", "batch_window_us", "max_batch_tokens")
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_ALLOWED_CHUNKS_FIELD_NUMBER: _ClassVar[int]
    MAX_POSITION_EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    BATCH_WINDOW_US_FIELD_NUMBER: _ClassVar[int]
    MAX_BATCH_TOKENS_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    max_allowed_chunks: int
    max_position_embeddings: int
    target_device: str
    plugin_config: str
    max_batch_size: int
    batch_window_us: int
    max_batch_tokens: int
    def __init__(self, models_path: _Optional[str] = ..., max_allowed_chunks: _Optional[int] = ..., max_position_embeddings: _Optional[int] = ..., target_device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., max_batch_size: _Optional[int] = ..., batch_window_us: _Optional[int] = ..., max_batch_tokens: _Optional[int] = ...) -> None: ...
