from graphruntime._proto import mediapipe_options_pb2 as _mediapipe_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DefaultInputStreamHandlerOptions(_message.Message):
    __slots__ = ("batch_size",)
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    batch_size: int
    def __init__(self, batch_size: _Optional[int] = ...) -> None: ...

class SyncSetInputStreamHandlerOptions(_message.Message):
    __slots__ = ("sync_set",)
    class SyncSet(_message.Message):
        __slots__ = ("tag_index",)
        TAG_INDEX_FIELD_NUMBER: _ClassVar[int]
        tag_index: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, tag_index: _Optional[_Iterable[str]] = ...) -> None: ...
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    SYNC_SET_FIELD_NUMBER: _ClassVar[int]
    sync_set: _containers.RepeatedCompositeFieldContainer[SyncSetInputStreamHandlerOptions.SyncSet]
    def __init__(self, sync_set: _Optional[_Iterable[_Union[SyncSetInputStreamHandlerOptions.SyncSet, _Mapping]]] = ...) -> None: ...

class FixedSizeInputStreamHandlerOptions(_message.Message):
    __slots__ = ("trigger_queue_size", "target_queue_size", "fixed_min_size")
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    TRIGGER_QUEUE_SIZE_FIELD_NUMBER: _ClassVar[int]
    TARGET_QUEUE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FIXED_MIN_SIZE_FIELD_NUMBER: _ClassVar[int]
    trigger_queue_size: int
    target_queue_size: int
    fixed_min_size: bool
    def __init__(self, trigger_queue_size: _Optional[int] = ..., target_queue_size: _Optional[int] = ..., fixed_min_size: _Optional[bool] = ...) -> None: ...

class TimestampAlignInputStreamHandlerOptions(_message.Message):
    __slots__ = ("timestamp_base_tag_index",)
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    TIMESTAMP_BASE_TAG_INDEX_FIELD_NUMBER: _ClassVar[int]
    timestamp_base_tag_index: str
    def __init__(self, timestamp_base_tag_index: _Optional[str] = ...) -> None: ...

class ThreadPoolExecutorOptions(_message.Message):
    __slots__ = ("num_threads", "stack_size", "nice_priority_level", "require_processor_performance", "thread_name_prefix")
    class ProcessorPerformance(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NORMAL: _ClassVar[ThreadPoolExecutorOptions.ProcessorPerformance]
        LOW: _ClassVar[ThreadPoolExecutorOptions.ProcessorPerformance]
        HIGH: _ClassVar[ThreadPoolExecutorOptions.ProcessorPerformance]
    NORMAL: ThreadPoolExecutorOptions.ProcessorPerformance
    LOW: ThreadPoolExecutorOptions.ProcessorPerformance
    HIGH: ThreadPoolExecutorOptions.ProcessorPerformance
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    NUM_THREADS_FIELD_NUMBER: _ClassVar[int]
    STACK_SIZE_FIELD_NUMBER: _ClassVar[int]
    NICE_PRIORITY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_PROCESSOR_PERFORMANCE_FIELD_NUMBER: _ClassVar[int]
    THREAD_NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    num_threads: int
    stack_size: int
    nice_priority_level: int
    require_processor_performance: ThreadPoolExecutorOptions.ProcessorPerformance
    thread_name_prefix: str
    def __init__(self, num_threads: _Optional[int] = ..., stack_size: _Optional[int] = ..., nice_priority_level: _Optional[int] = ..., require_processor_performance: _Optional[_Union[ThreadPoolExecutorOptions.ProcessorPerformance, str]] = ..., thread_name_prefix: _Optional[str] = ...) -> None: ...
