"""Build the speech-to-text servable behind STT_NODE_RESOURCES from the node's options.

The only place that knows both OVMS's S2tCalculatorOptions and the servable's settings.
"""

from __future__ import annotations

from pathlib import Path

from calculators.model_paths import resolve_model_dir
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from calculators.speech_to_text.s2t_calculator_pb2 import S2tCalculatorOptions
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.speech_to_text.servable import TranscriptionConfig, TranscriptionServable


def servable_config(
    options: S2tCalculatorOptions, graph_dir: Path, name: str
) -> TranscriptionConfig:
    return TranscriptionConfig(
        name=name,
        models_path=resolve_model_dir(
            options.models_path, graph_dir, "Speech to text", ("openvino_encoder_model.xml",)
        ),
        device=options.target_device or "CPU",
        properties=parse_plugin_config(options.plugin_config),
        word_timestamps=options.enable_word_timestamps,
    )


def build_transcription_servable(
    graph: ValidatedGraph, node: NodeSpec, owner: str
) -> TranscriptionServable:
    options = node_options(graph, node, S2tCalculatorOptions)
    return TranscriptionServable(servable_config(options, Path(graph.directory), owner))
