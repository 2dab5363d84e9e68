"""Build the embeddings servable behind EMBEDDINGS_NODE_RESOURCES from the node's options.

The only place that knows both OVMS's option names (EmbeddingsCalculatorOVOptions) and the
servable's settings, so graph files stay OVMS-compatible while servables stay free of protobuf.
"""

from __future__ import annotations

from pathlib import Path

from calculators.embeddings.embeddings_calculator_ov_pb2 import EmbeddingsCalculatorOVOptions
from calculators.encoders.options import batch_limits
from calculators.model_paths import resolve_model_dir
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.embeddings.servable import EmbeddingsConfig, EmbeddingsServable
from servables.encoders.model_dir import MODEL_FILE, TOKENIZER_FILE
from servables.errors import ServableLoadError


def servable_config(
    options: EmbeddingsCalculatorOVOptions, graph_dir: Path, name: str
) -> EmbeddingsConfig:
    """EmbeddingsCalculatorOVOptions → EmbeddingsConfig, with OVMS's defaults."""
    if not options.HasField("models_path"):
        raise ServableLoadError(
            "EmbeddingsCalculatorOVOptions.models_path is required", param="models_path"
        )
    if options.max_inputs < 1:
        raise ServableLoadError("max_inputs must be at least 1", param="max_inputs")
    pooling = (
        EmbeddingsCalculatorOVOptions.Pooling.Name(options.pooling)
        if options.HasField("pooling")
        else None
    )
    return EmbeddingsConfig(
        name=name,
        models_path=resolve_model_dir(
            options.models_path, graph_dir, "Embeddings", (MODEL_FILE, TOKENIZER_FILE)
        ),
        device=options.target_device or "CPU",
        properties=parse_plugin_config(options.plugin_config),
        pooling=pooling,
        normalize=options.normalize_embeddings,
        truncate=options.truncate,
        max_inputs=options.max_inputs,
        batch=batch_limits(options),
    )


def build_embeddings_servable(
    graph: ValidatedGraph, node: NodeSpec, owner: str
) -> EmbeddingsServable:
    options = node_options(graph, node, EmbeddingsCalculatorOVOptions)
    return EmbeddingsServable(servable_config(options, Path(graph.directory), owner))
