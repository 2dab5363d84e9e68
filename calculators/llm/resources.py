"""Build the LLM servable behind LLM_NODE_RESOURCES from the node's LLMCalculatorOptions.

This is the only place that knows both the graph option names (OVMS's proto) and the servable's
settings, so graph files stay OVMS-compatible while servables stay free of protobuf.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.errors import ServableLoadError
from servables.llm.lora import LoadedAdapter, LoraAdapterSpec, check_alias, load_adapter
from servables.llm.model_files import PipelineType, is_gguf, resolve_models_path
from servables.llm.output_parsers import validate_parser_names
from servables.llm.servable import LLMServable, LLMServableConfig

logger = logging.getLogger(__name__)

DRAFT_OPTIONS = (
    "draft_device",
    "draft_max_num_batched_tokens",
    "draft_cache_size",
    "draft_block_size",
    "draft_max_num_seqs",
    "draft_dynamic_split_fuse",
    "draft_eagle3_mode",
)


def _scheduler(options: LLMCalculatorOptions) -> dict[str, Any]:
    scheduler: dict[str, Any] = {
        "cache_size": options.cache_size,
        "max_num_batched_tokens": options.max_num_batched_tokens,
        "max_num_seqs": options.max_num_seqs,
        "dynamic_split_fuse": options.dynamic_split_fuse,
        "enable_prefix_caching": options.enable_prefix_caching,
    }
    if options.HasField("cache_interval_multiplier"):
        scheduler["cache_interval_multiplier"] = options.cache_interval_multiplier
    if options.HasField("cache_eviction_config"):
        eviction = options.cache_eviction_config
        for required in ("start_size", "recent_size", "max_cache_size"):
            if not eviction.HasField(required):
                raise ServableLoadError(
                    f"cache_eviction_config.{required} is required", param="cache_eviction_config"
                )
        scheduler["cache_eviction_config"] = {
            "aggregation_mode": LLMCalculatorOptions.CacheEvictionConfig.AggregationMode.Name(
                eviction.aggregation_mode
            ),
            "start_size": eviction.start_size,
            "recent_size": eviction.recent_size,
            "max_cache_size": eviction.max_cache_size,
            "apply_rotation": eviction.apply_rotation,
            "snapkv_window_size": eviction.snapkv_window_size,
        }
        if eviction.HasField("kv_crush_config"):
            crush = eviction.kv_crush_config
            scheduler["cache_eviction_config"]["kvcrush_config"] = {
                "budget": crush.budget,
                "anchor_point_mode": LLMCalculatorOptions.KVCrushConfig.AnchorPointMode.Name(
                    crush.anchor_point_mode
                ),
                "rng_seed": crush.rng_seed,
            }
    if options.HasField("sparse_attention_config"):
        sparse = options.sparse_attention_config
        settings: dict[str, Any] = {
            "mode": LLMCalculatorOptions.SparseAttentionConfig.SparseAttentionMode.Name(sparse.mode)
        }
        for name in (
            "num_last_dense_tokens_in_prefill",
            "num_retained_start_tokens_in_cache",
            "num_retained_recent_tokens_in_cache",
            "xattention_threshold",
            "xattention_block_size",
            "xattention_stride",
        ):
            if sparse.HasField(name):
                settings[name] = getattr(sparse, name)
        scheduler["sparse_attention_config"] = settings
    return scheduler


def _draft(options: LLMCalculatorOptions, graph_dir: Path, device: str) -> dict[str, Any] | None:
    if not options.HasField("draft_models_path"):
        given = [name for name in DRAFT_OPTIONS if options.HasField(name)]
        if given:
            raise ServableLoadError(
                f"{', '.join(given)} need draft_models_path to be set", param=given[0]
            )
        return None
    if options.draft_eagle3_mode:
        raise ServableLoadError(
            "draft_eagle3_mode is not supported by graphrt yet", param="draft_eagle3_mode"
        )
    scheduler = {
        "cache_size": options.draft_cache_size
        if options.HasField("draft_cache_size")
        else options.cache_size,
        "max_num_batched_tokens": options.draft_max_num_batched_tokens
        if options.HasField("draft_max_num_batched_tokens")
        else options.max_num_batched_tokens,
        "max_num_seqs": options.draft_max_num_seqs
        if options.HasField("draft_max_num_seqs")
        else options.max_num_seqs,
        "dynamic_split_fuse": options.draft_dynamic_split_fuse
        if options.HasField("draft_dynamic_split_fuse")
        else options.dynamic_split_fuse,
    }
    try:
        draft_path = resolve_models_path(options.draft_models_path, graph_dir)
    except ServableLoadError as error:
        raise ServableLoadError(
            error.message.replace("models_path", "draft_models_path", 1),
            param="draft_models_path",
        ) from error
    return {
        "models_path": str(draft_path),
        "device": options.draft_device or device,
        "scheduler": scheduler,
    }


def _adapters(
    options: LLMCalculatorOptions, graph_dir: Path, name: str
) -> tuple[LoadedAdapter, ...]:
    """The node's lora_adapters, their files found and their aliases free to be model names."""
    adapters: list[LoadedAdapter] = []
    for entry in options.lora_adapters:
        check_alias(entry.alias, name)
        if any(adapter.alias == entry.alias for adapter in adapters):
            raise ServableLoadError(
                f"LoRA adapter alias {entry.alias!r} is used twice", param="lora_adapters"
            )
        path = (graph_dir / Path(entry.path).expanduser()).resolve()
        adapters.append(load_adapter(LoraAdapterSpec(entry.alias, path, entry.alpha)))
    return tuple(adapters)


def _gguf_weights(options: LLMCalculatorOptions, models_path: Path) -> str:
    """The layout of a GGUF's weights: "genai" (the file's own) or a requantized one."""
    layout = LLMCalculatorOptions.GgufWeights.Name(options.gguf_weights).lower()
    if layout != "genai" and not is_gguf(models_path):
        raise ServableLoadError(
            f"gguf_weights: {layout.upper()} applies to a .gguf models_path, and "
            f"{models_path} is a model directory (export it with the layout instead: "
            "graphrt export --extra_quantization_params)",
            param="gguf_weights",
        )
    if layout != "genai" and options.lora_adapters:
        raise ServableLoadError(
            f"gguf_weights: {layout.upper()} cannot be combined with lora_adapters",
            param="gguf_weights",
        )
    return layout


def servable_config(
    options: LLMCalculatorOptions, graph_dir: Path, name: str, log_level: int = logging.INFO
) -> LLMServableConfig:
    """LLMCalculatorOptions → LLMServableConfig, with OVMS's defaults and load-time checks."""
    if not options.HasField("models_path"):
        raise ServableLoadError("LLMCalculatorOptions.models_path is required", param="models_path")
    models_path = resolve_models_path(options.models_path, graph_dir)
    gguf_weights = _gguf_weights(options, models_path)
    device = options.device or "CPU"
    properties = parse_plugin_config(options.plugin_config)
    tool_parser = options.tool_parser or None if options.HasField("tool_parser") else None
    reasoning_parser = (
        options.reasoning_parser or None if options.HasField("reasoning_parser") else None
    )
    # Names given explicitly are checked now, so a typo fails the load, not every request.
    validate_parser_names(
        None if tool_parser in (None, "none") else tool_parser,
        None if reasoning_parser in (None, "none") else reasoning_parser,
    )
    return LLMServableConfig(
        name=name,
        models_path=models_path,
        device=device,
        pipeline_type=PipelineType[LLMCalculatorOptions.PipelineType.Name(options.pipeline_type)],
        properties=properties,
        scheduler=_scheduler(options),
        draft=_draft(options, graph_dir, device),
        max_tokens_limit=options.max_tokens_limit if options.HasField("max_tokens_limit") else None,
        best_of_limit=options.best_of_limit,
        log_level=log_level,
        chat_template_mode=LLMCalculatorOptions.ChatTemplateMode.Name(options.chat_template_mode)
        if options.HasField("chat_template_mode")
        else None,
        tool_parser=tool_parser,
        reasoning_parser=reasoning_parser,
        enable_tool_guided_generation=options.enable_tool_guided_generation,
        adapters=_adapters(options, graph_dir, name),
        gguf_weights=gguf_weights,
    )


def build_llm_servable(graph: ValidatedGraph, node: NodeSpec, owner: str) -> LLMServable:
    options = node_options(graph, node, LLMCalculatorOptions)
    return LLMServable(
        servable_config(options, Path(graph.directory), owner, logging.getLogger().level)
    )
