"""Write the graph.pbtxt files that OVMS's export script and CLI would write.

Used in memory by `graphrt serve --model_path ...` when the directory has no graph.pbtxt, and on
disk by `graphrt export text_generation|embeddings_ov|rerank_ov`. Each graph is OVMS's template,
field for field. `infer_task` picks the graph for a model directory as OVMS's task detection
does (the image and audio graphs are in image_audio_graphs.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrt.export.graph_text import architectures, quote, read_json
from graphrt.export.image_audio_graphs import MEDIA_TASKS, image_task, media_task

GRAPH_TEMPLATE = """input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"
node: {{
  name: "LLMExecutor"
  calculator: "HttpLLMCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  input_side_packet: "LLM_NODE_EXECUTION_CONTEXTS:llm_ctx"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {{
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }}
  node_options: {{
    [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {{
{options}
    }}
  }}
  input_stream_handler {{
    input_stream_handler: "SyncSetInputStreamHandler",
    options {{
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {{
        sync_set {{
          tag_index: "LOOPBACK:0"
        }}
      }}
    }}
  }}
}}
"""


@dataclass
class TextGenerationSettings:
    """The options of OVMS's text_generation graph, with OVMS's defaults; each one named as a
    task flag is filled from it (task_flags.graph_options), so the names must stay the flags'."""

    models_path: str
    target_device: str = "CPU"
    max_num_seqs: int = 256
    cache_size: int = 0
    enable_prefix_caching: bool = True
    dynamic_split_fuse: bool = True
    max_num_batched_tokens: int | None = None
    pipeline_type: str | None = None
    kv_cache_precision: str | None = None
    plugin_config: dict[str, Any] = field(default_factory=dict)
    gguf_weights: str = "genai"  # graphrt's gguf_weights option, lower case
    draft_models_path: str | None = None
    max_tokens_limit: int | None = None
    best_of_limit: int | None = None
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    enable_tool_guided_generation: bool = False
    cache_interval_multiplier: int | None = None


def text_generation_graph(settings: TextGenerationSettings) -> str:
    lines = [f"max_num_seqs: {settings.max_num_seqs}"]
    if settings.target_device:
        lines.append(f"device: {quote(settings.target_device)}")
    lines.append(f"models_path: {quote(settings.models_path)}")
    plugin_config = dict(settings.plugin_config)
    if settings.kv_cache_precision:
        plugin_config["KV_CACHE_PRECISION"] = settings.kv_cache_precision
    if plugin_config:
        lines.append(f"plugin_config: {quote(json.dumps(plugin_config, ensure_ascii=False))}")
    lines.append(f"enable_prefix_caching: {str(settings.enable_prefix_caching).lower()}")
    lines.append(f"cache_size: {settings.cache_size}")
    if settings.pipeline_type:
        lines.append(f"pipeline_type: {settings.pipeline_type}")
    if settings.max_num_batched_tokens is not None:
        lines.append(f"max_num_batched_tokens: {settings.max_num_batched_tokens}")
    if settings.max_tokens_limit is not None:
        lines.append(f"max_tokens_limit: {settings.max_tokens_limit}")
    if settings.best_of_limit is not None:
        lines.append(f"best_of_limit: {settings.best_of_limit}")
    if settings.reasoning_parser:
        lines.append(f"reasoning_parser: {quote(settings.reasoning_parser)}")
    if settings.tool_parser:
        lines.append(f"tool_parser: {quote(settings.tool_parser)}")
    if settings.enable_tool_guided_generation:
        lines.append("enable_tool_guided_generation: true")
    if settings.cache_interval_multiplier is not None:
        lines.append(f"cache_interval_multiplier: {settings.cache_interval_multiplier}")
    if not settings.dynamic_split_fuse:
        lines.append("dynamic_split_fuse: false")
    if settings.draft_models_path:
        lines.append(f"draft_models_path: {quote(settings.draft_models_path)}")
    if settings.gguf_weights != "genai":
        lines.append(f"gguf_weights: {settings.gguf_weights.upper()}")
    options = "\n".join(f"      {line}," for line in lines)
    return GRAPH_TEMPLATE.format(options=options)


EMBEDDINGS_GRAPH_TEMPLATE = """input_stream: "REQUEST_PAYLOAD:input"
output_stream: "RESPONSE_PAYLOAD:output"
node {{
  name: "EmbeddingsExecutor"
  input_side_packet: "EMBEDDINGS_NODE_RESOURCES:embeddings_servable"
  calculator: "EmbeddingsCalculatorOV"
  input_stream: "REQUEST_PAYLOAD:input"
  output_stream: "RESPONSE_PAYLOAD:output"
  node_options: {{
    [type.googleapis.com / mediapipe.EmbeddingsCalculatorOVOptions]: {{
{options}
    }}
  }}
}}
"""

RERANK_GRAPH_TEMPLATE = """input_stream: "REQUEST_PAYLOAD:input"
output_stream: "RESPONSE_PAYLOAD:output"
node {{
  name: "RerankExecutor"
  input_side_packet: "RERANK_NODE_RESOURCES:rerank_servable"
  calculator: "RerankCalculatorOV"
  input_stream: "REQUEST_PAYLOAD:input"
  output_stream: "RESPONSE_PAYLOAD:output"
  node_options: {{
    [type.googleapis.com / mediapipe.RerankCalculatorOVOptions]: {{
{options}
    }}
  }}
}}
"""


@dataclass
class EmbeddingsSettings:
    """The options of OVMS's embeddings_ov graph (export_model.py, `--task embeddings`), OVMS's
    defaults; filled from the task flags of the same names (task_flags.graph_options)."""

    models_path: str
    target_device: str = "CPU"
    num_streams: int = 1
    normalize: bool = True
    pooling: str | None = None  # None: the model's 1_Pooling/config.json, else CLS
    truncate: bool = False
    plugin_config: dict[str, Any] = field(default_factory=dict)


@dataclass
class RerankSettings:
    """The options of OVMS's rerank_ov graph (export_model.py, `--task rerank`), OVMS's defaults;
    filled from the task flags of the same names (task_flags.graph_options)."""

    models_path: str
    target_device: str = "CPU"
    num_streams: int = 1
    max_allowed_chunks: int | None = None
    plugin_config: dict[str, Any] = field(default_factory=dict)


def _streams_config(plugin_config: dict[str, Any], num_streams: int) -> str:
    return quote(json.dumps({"NUM_STREAMS": str(num_streams), **plugin_config}))


def embeddings_graph(settings: EmbeddingsSettings) -> str:
    lines = [
        f"models_path: {quote(settings.models_path)}",
        f"plugin_config: {_streams_config(settings.plugin_config, settings.num_streams)}",
        f"normalize_embeddings: {str(settings.normalize).lower()}",
    ]
    if settings.pooling:
        lines.append(f"pooling: {settings.pooling}")
    if settings.truncate:
        lines.append("truncate: true")
    lines.append(f"target_device: {quote(settings.target_device or 'CPU')}")
    options = ",\n".join(f"      {line}" for line in lines)
    return EMBEDDINGS_GRAPH_TEMPLATE.format(options=options)


def rerank_graph(settings: RerankSettings) -> str:
    lines = [
        f"models_path: {quote(settings.models_path)}",
        f"plugin_config: {_streams_config(settings.plugin_config, settings.num_streams)}",
    ]
    if settings.max_allowed_chunks is not None:
        lines.append(f"max_allowed_chunks: {settings.max_allowed_chunks}")
    lines.append(f"target_device: {quote(settings.target_device or 'CPU')}")
    options = ",\n".join(f"      {line}" for line in lines)
    return RERANK_GRAPH_TEMPLATE.format(options=options)


TASKS = ("text_generation", "embeddings", "rerank", *MEDIA_TASKS)
# Encoder classes OVMS takes for embedding models (default_task_detector.cpp).
EMBEDDING_ARCHITECTURES = {
    "BertModel",
    "JinaBertModel",
    "MPNetModel",
    "Qwen2Model",
    "RobertaModel",
    "T5EncoderModel",
    "XLMRobertaModel",
}


def infer_task(path: Path) -> str:
    """The task of a model path, by OVMS's detectors in OVMS's order: speech2text,
    text2speech, rerank, image_generation, embeddings, else text_generation (a .gguf file)."""
    if not path.is_dir():
        return "text_generation"
    media = media_task(path)
    if media is not None:
        return media
    modules = read_json(path / "modules.json")
    types = (
        [str(m.get("type", "")) for m in modules if isinstance(m, dict)]
        if isinstance(modules, list)
        else []
    )
    names, _ = architectures(path)
    if any("CrossEncoder" in t or "LogitScore" in t for t in types) or any(
        a.endswith("ForSequenceClassification") for a in names
    ):
        return "rerank"
    image = image_task(path)
    if image is not None:
        return image
    if any("Pooling" in t for t in types) or any(a in EMBEDDING_ARCHITECTURES for a in names):
        return "embeddings"
    return "text_generation"
