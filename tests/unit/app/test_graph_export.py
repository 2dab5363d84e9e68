"""text_generation_graph: the generated graph parses, validates and decodes to the settings given.

Every test goes the whole way a served graph goes: text → parse_graph_config → ValidatedGraph →
node_options(LLMCalculatorOptions), and some on to servable_config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calculators.llm.llm_calculator_pb2 import LLMCalculatorOptions
from calculators.llm.resources import servable_config
from graphrt.export.text_graphs import TextGenerationSettings, text_generation_graph
from graphruntime import ValidatedGraph, parse_graph_config
from servables.llm.model_files import PipelineType


def validated(settings: TextGenerationSettings, path: str | None = None) -> ValidatedGraph:
    text = text_generation_graph(settings)
    graph = ValidatedGraph.from_config(parse_graph_config(text, path))
    assert graph.warnings == ()
    return graph


def decoded(settings: TextGenerationSettings) -> LLMCalculatorOptions:
    graph = validated(settings)
    (node,) = graph.nodes
    options = graph.node_options(node, LLMCalculatorOptions)
    assert isinstance(options, LLMCalculatorOptions)
    return options


# ---------------------------------------------------------------------------------- structure


def test_graph_structure_is_ovms_template() -> None:
    graph = validated(TextGenerationSettings(models_path="./"))
    assert graph.input_streams.names == ("input",)
    assert graph.input_streams.tags() == ("HTTP_REQUEST_PAYLOAD",)
    assert graph.output_streams.names == ("output",)
    assert graph.output_streams.tags() == ("HTTP_RESPONSE_PAYLOAD",)
    (node,) = graph.nodes
    assert node.name == "LLMExecutor"
    assert node.calculator_name == "HttpLLMCalculator"
    assert set(node.inputs.tags()) == {"LOOPBACK", "HTTP_REQUEST_PAYLOAD"}
    assert set(node.outputs.tags()) == {"LOOPBACK", "HTTP_RESPONSE_PAYLOAD"}
    assert set(node.input_side_packets.tags()) == {
        "LLM_NODE_RESOURCES",
        "LLM_NODE_EXECUTION_CONTEXTS",
    }
    assert len(node.back_edges) == 1
    assert node.handler.__name__ == "SyncSetInputStreamHandler"


def test_text_uses_the_any_option_form() -> None:
    text = text_generation_graph(TextGenerationSettings(models_path="m"))
    assert "[type.googleapis.com / mediapipe.LLMCalculatorOptions]" in text
    assert text.endswith("}\n")


def test_graph_path_gives_the_options_directory(tmp_path: Path) -> None:
    graph = validated(TextGenerationSettings(models_path="m"), str(tmp_path / "graph.pbtxt"))
    assert graph.directory == str(tmp_path)


# -------------------------------------------------------------------------------- option values


def test_defaults_decode_to_ovms_values() -> None:
    options = decoded(TextGenerationSettings(models_path="/models/smol"))
    assert options.models_path == "/models/smol"
    assert options.device == "CPU"
    assert options.max_num_seqs == 256
    assert options.cache_size == 0
    assert options.HasField("cache_size")
    assert options.enable_prefix_caching is True
    assert options.dynamic_split_fuse is True
    assert options.plugin_config == ""
    for unset in (
        "max_num_batched_tokens",
        "pipeline_type",
        "max_tokens_limit",
        "best_of_limit",
        "reasoning_parser",
        "tool_parser",
        "cache_interval_multiplier",
        "draft_models_path",
        "plugin_config",
    ):
        assert not options.HasField(unset), unset
    assert options.pipeline_type == LLMCalculatorOptions.AUTO
    assert options.best_of_limit == 20


def test_every_setting_decodes() -> None:
    settings = TextGenerationSettings(
        models_path="models/qwen",
        target_device="GPU.1",
        max_num_seqs=8,
        cache_size=4,
        enable_prefix_caching=False,
        dynamic_split_fuse=False,
        max_num_batched_tokens=1024,
        pipeline_type="VLM_CB",
        kv_cache_precision="u8",
        plugin_config={"NUM_STREAMS": 2, "prompt_lookup": True},
        draft_models_path="models/draft",
        max_tokens_limit=4096,
        best_of_limit=4,
        reasoning_parser="qwen3",
        tool_parser="hermes3",
        enable_tool_guided_generation=True,
        cache_interval_multiplier=3,
        gguf_weights="int4_channelwise",
    )
    options = decoded(settings)
    assert options.gguf_weights == LLMCalculatorOptions.INT4_CHANNELWISE
    assert options.models_path == "models/qwen"
    assert options.device == "GPU.1"
    assert options.max_num_seqs == 8
    assert options.cache_size == 4
    assert options.enable_prefix_caching is False
    assert options.dynamic_split_fuse is False
    assert options.max_num_batched_tokens == 1024
    assert options.pipeline_type == LLMCalculatorOptions.VLM_CB
    assert json.loads(options.plugin_config) == {
        "NUM_STREAMS": 2,
        "prompt_lookup": True,
        "KV_CACHE_PRECISION": "u8",
    }
    assert options.draft_models_path == "models/draft"
    assert options.max_tokens_limit == 4096
    assert options.best_of_limit == 4
    assert options.reasoning_parser == "qwen3"
    assert options.tool_parser == "hermes3"
    assert options.enable_tool_guided_generation is True
    assert options.cache_interval_multiplier == 3


@pytest.mark.parametrize("pipeline_type", LLMCalculatorOptions.PipelineType.keys())
def test_pipeline_types(pipeline_type: str) -> None:
    options = decoded(TextGenerationSettings(models_path="m", pipeline_type=pipeline_type))
    assert LLMCalculatorOptions.PipelineType.Name(options.pipeline_type) == pipeline_type


def test_zero_limits_are_written() -> None:
    options = decoded(
        TextGenerationSettings(
            models_path="m",
            max_tokens_limit=0,
            best_of_limit=0,
            max_num_batched_tokens=0,
            cache_interval_multiplier=0,
        )
    )
    for name in (
        "max_tokens_limit",
        "best_of_limit",
        "max_num_batched_tokens",
        "cache_interval_multiplier",
    ):
        assert options.HasField(name), name
        assert getattr(options, name) == 0


def test_empty_device_is_left_out() -> None:
    options = decoded(TextGenerationSettings(models_path="m", target_device=""))
    assert not options.HasField("device")


def test_kv_cache_precision_overrides_plugin_config() -> None:
    settings = TextGenerationSettings(
        models_path="m", kv_cache_precision="f16", plugin_config={"KV_CACHE_PRECISION": "u8"}
    )
    assert json.loads(decoded(settings).plugin_config) == {"KV_CACHE_PRECISION": "f16"}
    assert settings.plugin_config == {"KV_CACHE_PRECISION": "u8"}  # the settings are not changed


# ----------------------------------------------------------------------------------- quoting


@pytest.mark.parametrize(
    "models_path",
    [
        "./",
        "/models/Qwen2.5-7B-Instruct",
        'dir with "quotes"',
        "C:\\models\\smol",
        "trailing\\",
        "it's",
        "модель/ü 🐉",
        "tab\there",
    ],
)
def test_models_path_round_trips(models_path: str) -> None:
    assert decoded(TextGenerationSettings(models_path=models_path)).models_path == models_path


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        "it's",
        "ü 🐉",
        "C:\\cache\\dir",  # a Windows CACHE_DIR
        'say "hi"',
        "two\nlines",
        "back\\slash and 'quote' and \"dq\"",
    ],
    ids=["plain", "single-quote", "unicode", "backslashes", "double-quotes", "newline", "mixed"],
)
def test_plugin_config_round_trips(value: str) -> None:
    plugin_config: dict[str, Any] = {"CACHE_DIR": value, "n": [1, 2.5, None, True]}
    options = decoded(TextGenerationSettings(models_path="m", plugin_config=plugin_config))
    assert json.loads(options.plugin_config) == plugin_config


@pytest.mark.parametrize("name", ["reasoning_parser", "tool_parser", "draft_models_path"])
def test_other_strings_round_trip(name: str) -> None:
    value = 'odd "name" \\ ü'
    settings = TextGenerationSettings(models_path="m")
    setattr(settings, name, value)
    options = decoded(settings)
    assert getattr(options, name) == value


# -------------------------------------------------------------------- through to the servable


def test_exported_graph_builds_the_servable_config(tmp_path: Path) -> None:
    (tmp_path / "x.gguf").write_bytes(b"")
    settings = TextGenerationSettings(
        models_path="./x.gguf",
        max_tokens_limit=100,
        best_of_limit=5,
        pipeline_type="LM_CB",
        plugin_config={"KV_CACHE_PRECISION": "u8"},
        cache_size=2,
        max_num_batched_tokens=64,
    )
    graph = validated(settings, str(tmp_path / "graph.pbtxt"))
    options = graph.node_options(graph.nodes[0], LLMCalculatorOptions)
    assert isinstance(options, LLMCalculatorOptions)
    config = servable_config(options, Path(graph.directory), "smol")
    assert config.models_path == (tmp_path / "x.gguf").resolve()
    assert config.pipeline_type is PipelineType.LM_CB
    assert config.properties == {"KV_CACHE_PRECISION": "u8"}
    assert config.max_tokens_limit == 100
    assert config.best_of_limit == 5
    assert config.scheduler == {
        "cache_size": 2,
        "max_num_batched_tokens": 64,
        "max_num_seqs": 256,
        "dynamic_split_fuse": True,
        "enable_prefix_caching": True,
    }
