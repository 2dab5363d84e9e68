"""The engine's edge with openvino-genai: building a pipeline, converting to and from its objects.

Both loops (servables.llm.engine.batching, servables.llm.engine.stateful) need the same conversions:
an `EngineSpec` into a pipeline, a request's plain-data config into a `GenerationConfig` (with its
`StructuredOutputConfig`, built here because genai's objects do not pickle), images into tensors,
and genai's results and errors back into plain data for the frontend (finish reasons, a vision
request's prompt token count, an error message fit for a client, a request's grammar as a key). They
live apart from the loops so each loop module holds only its scheduling.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servables.errors import readable_message
from servables.llm.engine.messages import EngineSpec
from servables.llm.gguf_graph import genai_model_dir
from servables.llm.gguf_lora import layer_names, named_model_dir
from servables.llm.gguf_requantize import requantized_model_dir
from servables.llm.lora import LoadedAdapter, check_targets, target_modules, tensor_names
from servables.llm.model_files import is_gguf, openable_gguf

logger = logging.getLogger(__name__)

# GenerationConfig fields the frontend may set; anything else is a programming error.
CONFIG_FIELDS = frozenset(
    {
        "max_new_tokens",
        "max_length",
        "ignore_eos",
        "min_new_tokens",
        "echo",
        "logprobs",
        "stop_strings",
        "include_stop_str_in_output",
        "stop_token_ids",
        "do_sample",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "repetition_penalty",
        "presence_penalty",
        "frequency_penalty",
        "length_penalty",
        "rng_seed",
        "num_return_sequences",
        "num_beams",
        "num_beam_groups",
        "diversity_penalty",
        "no_repeat_ngram_size",
        "num_assistant_tokens",
        "assistant_confidence_threshold",
        "max_ngram_size",
    }
)

MAX_ENGINE_MESSAGE = 400
_LOG_TIME = re.compile(r"\[\d{2}:\d{2}:\d{2}\]\s*")


def grammar_key(config: dict[str, Any]) -> tuple[str, str] | None:
    """A request's grammar as (StructuredOutputConfig field, text), or None."""
    fields = config.get("structured_output")
    if not fields:
        return None
    ((kind, text),) = fields.items()
    return (str(kind), str(text))


def engine_message(error: BaseException) -> str:
    """The engine's error for a client: without log timestamps and the build machine's paths."""
    text = " ".join(readable_message(_LOG_TIME.sub("", str(error))).split())
    return text[:MAX_ENGINE_MESSAGE] or type(error).__name__


def finish_reason(reason: Any) -> str | None:
    name = getattr(reason, "name", str(reason))
    if name == "LENGTH":
        return "length"
    if name in ("STOP", "TOOL_CALL"):
        return "stop"
    return None


def _scheduler_config(settings: dict[str, Any]) -> Any:
    import openvino_genai

    config = openvino_genai.SchedulerConfig()
    for name, value in settings.items():
        if name == "cache_eviction_config":
            eviction = dict(value)
            mode = getattr(
                openvino_genai.AggregationMode, eviction.pop("aggregation_mode", "NORM_SUM")
            )
            crush = eviction.pop("kvcrush_config", None)
            if crush is not None:  # KVCrush: which evicted blocks to keep, within `budget`
                crush = dict(crush)
                anchor = getattr(
                    openvino_genai.KVCrushAnchorPointMode, crush.pop("anchor_point_mode")
                )
                eviction["kvcrush_config"] = openvino_genai.KVCrushConfig(
                    anchor_point_mode=anchor, **crush
                )
            config.cache_eviction_config = openvino_genai.CacheEvictionConfig(
                aggregation_mode=mode, **eviction
            )
            config.use_cache_eviction = True
        elif name == "sparse_attention_config":
            sparse = dict(value)
            mode = getattr(openvino_genai.SparseAttentionMode, sparse.pop("mode", "TRISHAPE"))
            attention = openvino_genai.SparseAttentionConfig(mode=mode)
            for key, item in sparse.items():
                setattr(attention, key, item)
            config.sparse_attention_config = attention
            config.use_sparse_attention = True
        else:
            setattr(config, name, value)
    return config


# Each engine is a process of its own, and OpenVINO's CPU plugin pins a process's threads to cores
# as if it had the machine alone. Pinned engines on the same cores get in each other's way: on two
# cores, loading a model (a reload's replacement) waited until a stream on another engine ended
# (7-9 s against 0.4 s), and two SmolLM2 streams on two models at once took 20-24 s pinned against
# 15-18 s unpinned. One stream alone was no slower unpinned (benchmarks/cpu_pinning.py).
CPU_PINNING = "ENABLE_CPU_PINNING"


def with_engine_defaults(device: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """`properties` (a graph's plugin_config) with the engine's own defaults for `device`:
    no CPU pinning on a CPU unless the plugin_config asks for it."""
    merged = dict(properties)
    if device == "CPU":
        merged.setdefault(CPU_PINNING, False)
    return merged


def _properties(spec: EngineSpec) -> dict[str, Any]:
    import openvino_genai

    properties = with_engine_defaults(spec.device, spec.properties)
    if spec.draft:
        draft = dict(spec.draft)
        path = str(openable_gguf(Path(draft.pop("models_path"))))
        device = draft.pop("device", "") or spec.device
        draft = with_engine_defaults(device, draft)
        scheduler = draft.pop("scheduler", None)
        if scheduler:
            draft["scheduler_config"] = _scheduler_config(scheduler)
        properties["draft_model"] = openvino_genai.draft_model(path, device, **draft)
    return properties


def _adapter_config(adapter: LoadedAdapter, model_dir: Path) -> Any:
    """genai's AdapterConfig for `adapter`, once its layers are known to be in the model."""
    import openvino_genai

    modules = target_modules(tensor_names(Path(adapter.weights)))
    unused = check_targets(adapter.alias, modules, layer_names(model_dir))
    if unused:
        logger.warning(
            "LoRA adapter %s: %d of its %d target layers are not in the model and are skipped "
            "(e.g. %s)",
            adapter.alias,
            len(unused),
            len(modules),
            unused[0],
        )
    return openvino_genai.AdapterConfig(openvino_genai.Adapter(adapter.weights), adapter.scale)


def _activate(pipeline: Any, adapters: Any) -> None:
    """Switch a continuous-batching pipeline's adapter on.

    genai 2026.4 applies adapters only in generate() (set_adapters), never for add_request: the
    adapter given at construction stays off until a generate() call names it, and stays on after.
    """
    config = pipeline.get_config()
    config.max_new_tokens = 1
    config.adapters = adapters
    pipeline.generate(["."], [config])


def _loadable(models_path: Path) -> Path:
    """What genai loads for `models_path`: a GGUF's saved graph (made at its first load), or the
    file itself when the cache cannot hold the graph; any other path as it is."""
    if not is_gguf(models_path):
        return models_path
    try:
        model_dir = genai_model_dir(models_path)
    except OSError as error:
        logger.warning(
            "%s: loading the file itself; its graph could not be cached (%s)", models_path, error
        )
        return openable_gguf(models_path)
    logger.info("%s: loading openvino-genai's graph of it, saved in %s", models_path, model_dir)
    return model_dir


def build_pipeline(spec: EngineSpec) -> Any:
    import openvino_genai

    properties = _properties(spec)
    adapters = None
    if spec.gguf_weights != "genai":
        models_path = str(requantized_model_dir(Path(spec.models_path), spec.gguf_weights))
        logger.info(
            "%s: weights requantized to %s (gguf_weights), from %s",
            spec.models_path,
            spec.gguf_weights,
            models_path,
        )
    elif spec.adapter is None:
        models_path = str(_loadable(Path(spec.models_path)))
    else:  # a GGUF's graph with Hugging Face's layer names (made from a writable copy)
        model_dir = named_model_dir(Path(spec.models_path))
        models_path = str(model_dir)
        adapters = properties["adapters"] = _adapter_config(spec.adapter, model_dir)
    if spec.kind in ("LM_CB", "VLM_CB"):
        scheduler = _scheduler_config(spec.scheduler)
        logger.debug("scheduler: %s", " ".join(scheduler.to_string().split()))
        pipeline = openvino_genai.ContinuousBatchingPipeline(
            models_path, scheduler, spec.device, properties
        )
        if adapters is not None:
            _activate(pipeline, adapters)
        return pipeline
    if spec.kind == "LM":
        return openvino_genai.LLMPipeline(models_path, spec.device, **properties)
    if spec.kind == "VLM":
        return openvino_genai.VLMPipeline(models_path, spec.device, **properties)
    raise ValueError(f"unsupported pipeline type {spec.kind}")


# StructuredOutputConfig fields, each given as text (a JSON schema / structural tag as JSON).
STRUCTURED_OUTPUT_FIELDS = frozenset({"json_schema", "regex", "grammar", "structural_tags_config"})


def structured_output_config(fields: dict[str, str]) -> Any:
    """The engine's StructuredOutputConfig, built here because it does not pickle.

    The frontend checked the grammar (servables/llm/grammar_check.py): one that fails to compile
    inside a step would break the pipeline for every request.
    """
    import openvino_genai

    unknown = set(fields) - STRUCTURED_OUTPUT_FIELDS
    if unknown or len(fields) != 1:
        raise ValueError(f"bad structured output fields {sorted(fields)}")
    return openvino_genai.StructuredOutputConfig(**fields)


def generation_config(pipeline: Any, fields: dict[str, Any]) -> Any:
    config = (
        pipeline.get_generation_config()
        if hasattr(pipeline, "get_generation_config")
        else (pipeline.get_config())
    )
    for name, value in fields.items():
        if name == "structured_output":
            config.structured_output_config = structured_output_config(value)
            continue
        if name not in CONFIG_FIELDS:
            raise ValueError(f"unknown generation config field {name}")
        if name in ("stop_strings", "stop_token_ids"):
            value = set(value)
        setattr(config, name, value)
    config.validate()
    return config


def image_tensors(images: tuple[Any, ...]) -> list[Any]:
    """ov.Tensors over the RGB HWC uint8 arrays, sharing their memory (genai encodes the images
    inside add_request / generate, while the message that owns the arrays is still alive)."""
    import openvino as ov

    return [ov.Tensor(image, shared_memory=True) for image in images]


def vlm_prompt_tokens(results_or_handle: Any) -> int:
    """The engine's prompt token count of a finished vision request (0 if unavailable)."""
    try:
        getter = getattr(results_or_handle, "get_vlm_perf_metrics", None)
        metrics = getter() if getter is not None else results_or_handle.perf_metrics
        return int(metrics.get_num_input_tokens())
    except (RuntimeError, AttributeError):
        return 0
