"""Build the rerank servable behind RERANK_NODE_RESOURCES from the node's options.

The only place that knows both OVMS's option names (RerankCalculatorOVOptions) and the
servable's settings, so graph files stay OVMS-compatible while servables stay free of protobuf.
"""

from __future__ import annotations

from pathlib import Path

from calculators.encoders.options import batch_limits
from calculators.model_paths import resolve_model_dir
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from calculators.rerank.rerank_calculator_ov_pb2 import RerankCalculatorOVOptions
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.encoders.model_dir import MODEL_FILE, TOKENIZER_FILE
from servables.errors import ServableLoadError
from servables.rerank.servable import RerankConfig, RerankServable


def servable_config(options: RerankCalculatorOVOptions, graph_dir: Path, name: str) -> RerankConfig:
    """RerankCalculatorOVOptions → RerankConfig, with OVMS's defaults."""
    if not options.HasField("models_path"):
        raise ServableLoadError(
            "RerankCalculatorOVOptions.models_path is required", param="models_path"
        )
    if options.max_allowed_chunks < 1:
        raise ServableLoadError("max_allowed_chunks must be at least 1", param="max_allowed_chunks")
    batch = batch_limits(options)
    return RerankConfig(
        name=name,
        models_path=resolve_model_dir(
            options.models_path, graph_dir, "Rerank", (MODEL_FILE, TOKENIZER_FILE)
        ),
        device=options.target_device or "CPU",
        properties=parse_plugin_config(options.plugin_config),
        max_allowed_chunks=options.max_allowed_chunks,
        max_position_embeddings=options.max_position_embeddings
        if options.HasField("max_position_embeddings")
        else None,
        batch=batch,
    )


def build_rerank_servable(graph: ValidatedGraph, node: NodeSpec, owner: str) -> RerankServable:
    options = node_options(graph, node, RerankCalculatorOVOptions)
    return RerankServable(servable_config(options, Path(graph.directory), owner))
