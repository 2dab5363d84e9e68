"""Build the text-to-speech servable behind TTS_NODE_RESOURCES from the node's options.

The only place that knows both OVMS's T2sCalculatorOptions and the servable's settings.
"""

from __future__ import annotations

import math
from pathlib import Path

from calculators.model_paths import graph_relative, resolve_model_dir
from calculators.node_resources import node_options
from calculators.plugin_config import parse_plugin_config
from calculators.text_to_speech.t2s_calculator_pb2 import T2sCalculatorOptions
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.errors import ServableLoadError
from servables.text_to_speech.servable import SpeechConfig, SpeechServable


def servable_config(options: T2sCalculatorOptions, graph_dir: Path, name: str) -> SpeechConfig:
    low, high = options.speed_min, options.speed_max
    if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
        raise ServableLoadError(
            f"Invalid T2sCalculatorOptions: speed_min ({low:g}) must be <= speed_max ({high:g})",
            param="speed_min",
        )
    return SpeechConfig(
        name=name,
        models_path=resolve_model_dir(
            options.models_path, graph_dir, "Text to speech", ("config.json",)
        ),
        device=options.target_device or "CPU",
        properties=parse_plugin_config(options.plugin_config),
        voices={voice.name: graph_relative(voice.path, graph_dir) for voice in options.voices},
        speed_range=(low, high),
    )


def build_speech_servable(graph: ValidatedGraph, node: NodeSpec, owner: str) -> SpeechServable:
    options = node_options(graph, node, T2sCalculatorOptions)
    return SpeechServable(servable_config(options, Path(graph.directory), owner))
