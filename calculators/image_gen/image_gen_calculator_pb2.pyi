from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LoraLoadMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DYNAMIC: _ClassVar[LoraLoadMode]
    STATIC: _ClassVar[LoraLoadMode]
    FUSE: _ClassVar[LoraLoadMode]
DYNAMIC: LoraLoadMode
STATIC: LoraLoadMode
FUSE: LoraLoadMode

class ImageGenCalculatorOptions(_message.Message):
    __slots__ = ("models_path", "device", "plugin_config", "max_resolution", "default_resolution", "max_num_images_per_prompt", "default_num_inference_steps", "max_num_inference_steps", "resolution", "num_images_per_prompt", "guidance_scale", "lora_adapters", "composite_lora_adapters")
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MAX_RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_IMAGES_PER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_NUM_INFERENCE_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_INFERENCE_STEPS_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    NUM_IMAGES_PER_PROMPT_FIELD_NUMBER: _ClassVar[int]
    GUIDANCE_SCALE_FIELD_NUMBER: _ClassVar[int]
    LORA_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    COMPOSITE_LORA_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    device: str
    plugin_config: str
    max_resolution: str
    default_resolution: str
    max_num_images_per_prompt: int
    default_num_inference_steps: int
    max_num_inference_steps: int
    resolution: str
    num_images_per_prompt: int
    guidance_scale: float
    lora_adapters: _containers.RepeatedCompositeFieldContainer[LoraAdapterEntry]
    composite_lora_adapters: _containers.RepeatedCompositeFieldContainer[CompositeLoraAdapterEntry]
    def __init__(self, models_path: _Optional[str] = ..., device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., max_resolution: _Optional[str] = ..., default_resolution: _Optional[str] = ..., max_num_images_per_prompt: _Optional[int] = ..., default_num_inference_steps: _Optional[int] = ..., max_num_inference_steps: _Optional[int] = ..., resolution: _Optional[str] = ..., num_images_per_prompt: _Optional[int] = ..., guidance_scale: _Optional[float] = ..., lora_adapters: _Optional[_Iterable[_Union[LoraAdapterEntry, _Mapping]]] = ..., composite_lora_adapters: _Optional[_Iterable[_Union[CompositeLoraAdapterEntry, _Mapping]]] = ...) -> None: ...

class LoraAdapterEntry(_message.Message):
    __slots__ = ("alias", "path", "alpha", "mode")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    alias: str
    path: str
    alpha: float
    mode: LoraLoadMode
    def __init__(self, alias: _Optional[str] = ..., path: _Optional[str] = ..., alpha: _Optional[float] = ..., mode: _Optional[_Union[LoraLoadMode, str]] = ...) -> None: ...

class CompositeLoraComponent(_message.Message):
    __slots__ = ("adapter_alias", "alpha")
    ADAPTER_ALIAS_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    adapter_alias: str
    alpha: float
    def __init__(self, adapter_alias: _Optional[str] = ..., alpha: _Optional[float] = ...) -> None: ...

class CompositeLoraAdapterEntry(_message.Message):
    __slots__ = ("alias", "components")
    ALIAS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    alias: str
    components: _containers.RepeatedCompositeFieldContainer[CompositeLoraComponent]
    def __init__(self, alias: _Optional[str] = ..., components: _Optional[_Iterable[_Union[CompositeLoraComponent, _Mapping]]] = ...) -> None: ...
