from graphruntime._proto import calculator_options_pb2 as _calculator_options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LLMCalculatorOptions(_message.Message):
    __slots__ = ("models_path", "max_num_batched_tokens", "cache_size", "max_num_seqs", "dynamic_split_fuse", "device", "plugin_config", "best_of_limit", "max_tokens_limit", "enable_prefix_caching", "draft_models_path", "draft_device", "draft_max_num_batched_tokens", "draft_cache_size", "draft_block_size", "draft_max_num_seqs", "draft_dynamic_split_fuse", "draft_eagle3_mode", "pipeline_type", "cache_eviction_config", "tool_parser", "reasoning_parser", "enable_tool_guided_generation", "sparse_attention_config", "cache_interval_multiplier", "chat_template_mode", "lora_adapters", "gguf_weights")
    class PipelineType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        LM: _ClassVar[LLMCalculatorOptions.PipelineType]
        VLM: _ClassVar[LLMCalculatorOptions.PipelineType]
        LM_CB: _ClassVar[LLMCalculatorOptions.PipelineType]
        VLM_CB: _ClassVar[LLMCalculatorOptions.PipelineType]
        OMNI: _ClassVar[LLMCalculatorOptions.PipelineType]
        AUTO: _ClassVar[LLMCalculatorOptions.PipelineType]
    LM: LLMCalculatorOptions.PipelineType
    VLM: LLMCalculatorOptions.PipelineType
    LM_CB: LLMCalculatorOptions.PipelineType
    VLM_CB: LLMCalculatorOptions.PipelineType
    OMNI: LLMCalculatorOptions.PipelineType
    AUTO: LLMCalculatorOptions.PipelineType
    class GgufWeights(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        GENAI: _ClassVar[LLMCalculatorOptions.GgufWeights]
        INT4_CHANNELWISE: _ClassVar[LLMCalculatorOptions.GgufWeights]
        INT8_CHANNELWISE: _ClassVar[LLMCalculatorOptions.GgufWeights]
    GENAI: LLMCalculatorOptions.GgufWeights
    INT4_CHANNELWISE: LLMCalculatorOptions.GgufWeights
    INT8_CHANNELWISE: LLMCalculatorOptions.GgufWeights
    class ChatTemplateMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        MINJA: _ClassVar[LLMCalculatorOptions.ChatTemplateMode]
        JINJA: _ClassVar[LLMCalculatorOptions.ChatTemplateMode]
    MINJA: LLMCalculatorOptions.ChatTemplateMode
    JINJA: LLMCalculatorOptions.ChatTemplateMode
    class KVCrushConfig(_message.Message):
        __slots__ = ("budget", "anchor_point_mode", "rng_seed")
        class AnchorPointMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            RANDOM: _ClassVar[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode]
            ZEROS: _ClassVar[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode]
            ONES: _ClassVar[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode]
            MEAN: _ClassVar[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode]
            ALTERNATING: _ClassVar[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode]
        RANDOM: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        ZEROS: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        ONES: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        MEAN: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        ALTERNATING: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        BUDGET_FIELD_NUMBER: _ClassVar[int]
        ANCHOR_POINT_MODE_FIELD_NUMBER: _ClassVar[int]
        RNG_SEED_FIELD_NUMBER: _ClassVar[int]
        budget: int
        anchor_point_mode: LLMCalculatorOptions.KVCrushConfig.AnchorPointMode
        rng_seed: int
        def __init__(self, budget: _Optional[int] = ..., anchor_point_mode: _Optional[_Union[LLMCalculatorOptions.KVCrushConfig.AnchorPointMode, str]] = ..., rng_seed: _Optional[int] = ...) -> None: ...
    class CacheEvictionConfig(_message.Message):
        __slots__ = ("aggregation_mode", "start_size", "recent_size", "max_cache_size", "apply_rotation", "snapkv_window_size", "kv_crush_config")
        class AggregationMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            SUM: _ClassVar[LLMCalculatorOptions.CacheEvictionConfig.AggregationMode]
            NORM_SUM: _ClassVar[LLMCalculatorOptions.CacheEvictionConfig.AggregationMode]
        SUM: LLMCalculatorOptions.CacheEvictionConfig.AggregationMode
        NORM_SUM: LLMCalculatorOptions.CacheEvictionConfig.AggregationMode
        AGGREGATION_MODE_FIELD_NUMBER: _ClassVar[int]
        START_SIZE_FIELD_NUMBER: _ClassVar[int]
        RECENT_SIZE_FIELD_NUMBER: _ClassVar[int]
        MAX_CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
        APPLY_ROTATION_FIELD_NUMBER: _ClassVar[int]
        SNAPKV_WINDOW_SIZE_FIELD_NUMBER: _ClassVar[int]
        KV_CRUSH_CONFIG_FIELD_NUMBER: _ClassVar[int]
        aggregation_mode: LLMCalculatorOptions.CacheEvictionConfig.AggregationMode
        start_size: int
        recent_size: int
        max_cache_size: int
        apply_rotation: bool
        snapkv_window_size: int
        kv_crush_config: LLMCalculatorOptions.KVCrushConfig
        def __init__(self, aggregation_mode: _Optional[_Union[LLMCalculatorOptions.CacheEvictionConfig.AggregationMode, str]] = ..., start_size: _Optional[int] = ..., recent_size: _Optional[int] = ..., max_cache_size: _Optional[int] = ..., apply_rotation: _Optional[bool] = ..., snapkv_window_size: _Optional[int] = ..., kv_crush_config: _Optional[_Union[LLMCalculatorOptions.KVCrushConfig, _Mapping]] = ...) -> None: ...
    class SparseAttentionConfig(_message.Message):
        __slots__ = ("mode", "num_last_dense_tokens_in_prefill", "num_retained_start_tokens_in_cache", "num_retained_recent_tokens_in_cache", "xattention_threshold", "xattention_block_size", "xattention_stride")
        class SparseAttentionMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
            __slots__ = ()
            TRISHAPE: _ClassVar[LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode]
            XATTENTION: _ClassVar[LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode]
        TRISHAPE: LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode
        XATTENTION: LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode
        MODE_FIELD_NUMBER: _ClassVar[int]
        NUM_LAST_DENSE_TOKENS_IN_PREFILL_FIELD_NUMBER: _ClassVar[int]
        NUM_RETAINED_START_TOKENS_IN_CACHE_FIELD_NUMBER: _ClassVar[int]
        NUM_RETAINED_RECENT_TOKENS_IN_CACHE_FIELD_NUMBER: _ClassVar[int]
        XATTENTION_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
        XATTENTION_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
        XATTENTION_STRIDE_FIELD_NUMBER: _ClassVar[int]
        mode: LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode
        num_last_dense_tokens_in_prefill: int
        num_retained_start_tokens_in_cache: int
        num_retained_recent_tokens_in_cache: int
        xattention_threshold: float
        xattention_block_size: int
        xattention_stride: int
        def __init__(self, mode: _Optional[_Union[LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode, str]] = ..., num_last_dense_tokens_in_prefill: _Optional[int] = ..., num_retained_start_tokens_in_cache: _Optional[int] = ..., num_retained_recent_tokens_in_cache: _Optional[int] = ..., xattention_threshold: _Optional[float] = ..., xattention_block_size: _Optional[int] = ..., xattention_stride: _Optional[int] = ...) -> None: ...
    class LoraAdapter(_message.Message):
        __slots__ = ("alias", "path", "alpha")
        ALIAS_FIELD_NUMBER: _ClassVar[int]
        PATH_FIELD_NUMBER: _ClassVar[int]
        ALPHA_FIELD_NUMBER: _ClassVar[int]
        alias: str
        path: str
        alpha: float
        def __init__(self, alias: _Optional[str] = ..., path: _Optional[str] = ..., alpha: _Optional[float] = ...) -> None: ...
    EXT_FIELD_NUMBER: _ClassVar[int]
    ext: _descriptor.FieldDescriptor
    MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    DYNAMIC_SPLIT_FUSE_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    PLUGIN_CONFIG_FIELD_NUMBER: _ClassVar[int]
    BEST_OF_LIMIT_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ENABLE_PREFIX_CACHING_FIELD_NUMBER: _ClassVar[int]
    DRAFT_MODELS_PATH_FIELD_NUMBER: _ClassVar[int]
    DRAFT_DEVICE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_MAX_NUM_BATCHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_CACHE_SIZE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_BLOCK_SIZE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_MAX_NUM_SEQS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_DYNAMIC_SPLIT_FUSE_FIELD_NUMBER: _ClassVar[int]
    DRAFT_EAGLE3_MODE_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CACHE_EVICTION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    TOOL_PARSER_FIELD_NUMBER: _ClassVar[int]
    REASONING_PARSER_FIELD_NUMBER: _ClassVar[int]
    ENABLE_TOOL_GUIDED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    SPARSE_ATTENTION_CONFIG_FIELD_NUMBER: _ClassVar[int]
    CACHE_INTERVAL_MULTIPLIER_FIELD_NUMBER: _ClassVar[int]
    CHAT_TEMPLATE_MODE_FIELD_NUMBER: _ClassVar[int]
    LORA_ADAPTERS_FIELD_NUMBER: _ClassVar[int]
    GGUF_WEIGHTS_FIELD_NUMBER: _ClassVar[int]
    models_path: str
    max_num_batched_tokens: int
    cache_size: int
    max_num_seqs: int
    dynamic_split_fuse: bool
    device: str
    plugin_config: str
    best_of_limit: int
    max_tokens_limit: int
    enable_prefix_caching: bool
    draft_models_path: str
    draft_device: str
    draft_max_num_batched_tokens: int
    draft_cache_size: int
    draft_block_size: int
    draft_max_num_seqs: int
    draft_dynamic_split_fuse: bool
    draft_eagle3_mode: bool
    pipeline_type: LLMCalculatorOptions.PipelineType
    cache_eviction_config: LLMCalculatorOptions.CacheEvictionConfig
    tool_parser: str
    reasoning_parser: str
    enable_tool_guided_generation: bool
    sparse_attention_config: LLMCalculatorOptions.SparseAttentionConfig
    cache_interval_multiplier: int
    chat_template_mode: LLMCalculatorOptions.ChatTemplateMode
    lora_adapters: _containers.RepeatedCompositeFieldContainer[LLMCalculatorOptions.LoraAdapter]
    gguf_weights: LLMCalculatorOptions.GgufWeights
    def __init__(self, models_path: _Optional[str] = ..., max_num_batched_tokens: _Optional[int] = ..., cache_size: _Optional[int] = ..., max_num_seqs: _Optional[int] = ..., dynamic_split_fuse: _Optional[bool] = ..., device: _Optional[str] = ..., plugin_config: _Optional[str] = ..., best_of_limit: _Optional[int] = ..., max_tokens_limit: _Optional[int] = ..., enable_prefix_caching: _Optional[bool] = ..., draft_models_path: _Optional[str] = ..., draft_device: _Optional[str] = ..., draft_max_num_batched_tokens: _Optional[int] = ..., draft_cache_size: _Optional[int] = ..., draft_block_size: _Optional[int] = ..., draft_max_num_seqs: _Optional[int] = ..., draft_dynamic_split_fuse: _Optional[bool] = ..., draft_eagle3_mode: _Optional[bool] = ..., pipeline_type: _Optional[_Union[LLMCalculatorOptions.PipelineType, str]] = ..., cache_eviction_config: _Optional[_Union[LLMCalculatorOptions.CacheEvictionConfig, _Mapping]] = ..., tool_parser: _Optional[str] = ..., reasoning_parser: _Optional[str] = ..., enable_tool_guided_generation: _Optional[bool] = ..., sparse_attention_config: _Optional[_Union[LLMCalculatorOptions.SparseAttentionConfig, _Mapping]] = ..., cache_interval_multiplier: _Optional[int] = ..., chat_template_mode: _Optional[_Union[LLMCalculatorOptions.ChatTemplateMode, str]] = ..., lora_adapters: _Optional[_Iterable[_Union[LLMCalculatorOptions.LoraAdapter, _Mapping]]] = ..., gguf_weights: _Optional[_Union[LLMCalculatorOptions.GgufWeights, str]] = ...) -> None: ...
