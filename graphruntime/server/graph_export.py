"""Write the text-generation graph.pbtxt that OVMS's export script and CLI would write.

Used in memory by `graphrt serve --model_path ...` when the directory has no graph.pbtxt, and on
disk by `graphrt export text_generation`. The graph is OVMS's template, field for field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import text_encoding

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
    """OVMS's text_generation graph flags, with OVMS's defaults."""

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
    draft_models_path: str | None = None
    max_tokens_limit: int | None = None
    best_of_limit: int | None = None
    reasoning_parser: str | None = None
    tool_parser: str | None = None
    enable_tool_guided_generation: bool = False
    cache_interval_multiplier: int | None = None


def _quote(text: str) -> str:
    """A protobuf text-format string literal (escapes quotes, backslashes, newlines)."""
    return '"' + text_encoding.CEscape(text.encode(), as_utf8=True) + '"'


def text_generation_graph(settings: TextGenerationSettings) -> str:
    lines = [f"max_num_seqs: {settings.max_num_seqs}"]
    if settings.target_device:
        lines.append(f"device: {_quote(settings.target_device)}")
    lines.append(f"models_path: {_quote(settings.models_path)}")
    plugin_config = dict(settings.plugin_config)
    if settings.kv_cache_precision:
        plugin_config["KV_CACHE_PRECISION"] = settings.kv_cache_precision
    if plugin_config:
        lines.append(f"plugin_config: {_quote(json.dumps(plugin_config, ensure_ascii=False))}")
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
        lines.append(f"reasoning_parser: {_quote(settings.reasoning_parser)}")
    if settings.tool_parser:
        lines.append(f"tool_parser: {_quote(settings.tool_parser)}")
    if settings.enable_tool_guided_generation:
        lines.append("enable_tool_guided_generation: true")
    if settings.cache_interval_multiplier is not None:
        lines.append(f"cache_interval_multiplier: {settings.cache_interval_multiplier}")
    if not settings.dynamic_split_fuse:
        lines.append("dynamic_split_fuse: false")
    if settings.draft_models_path:
        lines.append(f"draft_models_path: {_quote(settings.draft_models_path)}")
    options = "\n".join(f"      {line}," for line in lines)
    return GRAPH_TEMPLATE.format(options=options)
