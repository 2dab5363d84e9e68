"""Embeddings and rerank graphs: OVMS's own graph.pbtxt files and graphrt's generated ones parse,
validate and decode to the servable settings; the task of a model directory is inferred as OVMS
infers it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calculators.embeddings.embeddings_calculator_ov_pb2 import EmbeddingsCalculatorOVOptions
from calculators.embeddings.resources import servable_config as embeddings_config
from calculators.rerank.rerank_calculator_ov_pb2 import RerankCalculatorOVOptions
from calculators.rerank.resources import servable_config as rerank_config
from graphrt.export.text_graphs import (
    EmbeddingsSettings,
    RerankSettings,
    embeddings_graph,
    infer_task,
    rerank_graph,
)
from graphruntime import ValidatedGraph, parse_graph_config
from servables.errors import ServableLoadError

TINY_CROSS_ENCODER = (
    Path(__file__).resolve().parents[2] / "fixtures" / "models" / "tiny-cross-encoder"
)

# Written by OVMS's demos/common/export_models/export_model.py (embeddings_ov), verbatim.
OVMS_EMBEDDINGS_GRAPH = """# OVMS_GRAPH_QUEUE_MAX_SIZE: AUTO
input_stream: "REQUEST_PAYLOAD:input"
output_stream: "RESPONSE_PAYLOAD:output"
node {
  name: "EmbeddingsExecutor"
  input_side_packet: "EMBEDDINGS_NODE_RESOURCES:embeddings_servable"
  calculator: "EmbeddingsCalculatorOV"
  input_stream: "REQUEST_PAYLOAD:input"
  output_stream: "RESPONSE_PAYLOAD:output"
  node_options: {
    [type.googleapis.com / mediapipe.EmbeddingsCalculatorOVOptions]: {
      models_path: "./",
      plugin_config: '{"NUM_STREAMS": "1" }',
      normalize_embeddings: true,
      pooling: LAST,
      truncate: true,
      target_device: "CPU"
    }
  }
}
"""
OVMS_RERANK_GRAPH = """input_stream: "REQUEST_PAYLOAD:input"
output_stream: "RESPONSE_PAYLOAD:output"
node {
  name: "RerankExecutor"
  input_side_packet: "RERANK_NODE_RESOURCES:rerank_servable"
  calculator: "RerankCalculatorOV"
  input_stream: "REQUEST_PAYLOAD:input"
  output_stream: "RESPONSE_PAYLOAD:output"
  node_options: {
    [type.googleapis.com / mediapipe.RerankCalculatorOVOptions]: {
      models_path: "./",
      plugin_config: '{"NUM_STREAMS": "2" }',
      max_allowed_chunks: 50,
      max_position_embeddings: 96,
      target_device: "CPU"
    }
  }
}
"""


def options_of(text: str, message: type) -> object:
    graph = ValidatedGraph.from_config(parse_graph_config(text))
    (node,) = graph.nodes
    return graph.node_options(node, message)


def test_ovms_embeddings_graph_decodes_to_servable_settings() -> None:
    options = options_of(OVMS_EMBEDDINGS_GRAPH, EmbeddingsCalculatorOVOptions)
    assert isinstance(options, EmbeddingsCalculatorOVOptions)
    config = embeddings_config(options, TINY_CROSS_ENCODER, "emb")
    assert config.pooling == "LAST" and config.truncate and config.normalize
    assert config.properties == {"NUM_STREAMS": "1"}
    assert config.models_path == TINY_CROSS_ENCODER.resolve()
    assert config.batch.max_batch_size == 32 and config.max_inputs == 2048


def test_ovms_rerank_graph_decodes_to_servable_settings() -> None:
    options = options_of(OVMS_RERANK_GRAPH, RerankCalculatorOVOptions)
    assert isinstance(options, RerankCalculatorOVOptions)
    config = rerank_config(options, TINY_CROSS_ENCODER, "rr")
    assert config.max_allowed_chunks == 50 and config.max_position_embeddings == 96
    assert config.properties == {"NUM_STREAMS": "2"}


@pytest.mark.parametrize("pooling", [None, "CLS", "MEAN"])
def test_generated_embeddings_graph_round_trips(pooling: str | None) -> None:
    text = embeddings_graph(
        EmbeddingsSettings("./", num_streams=2, pooling=pooling, normalize=False, truncate=True)
    )
    options = options_of(text, EmbeddingsCalculatorOVOptions)
    assert isinstance(options, EmbeddingsCalculatorOVOptions)
    assert options.HasField("pooling") == (pooling is not None)
    if pooling:
        assert EmbeddingsCalculatorOVOptions.Pooling.Name(options.pooling) == pooling
    assert not options.normalize_embeddings and options.truncate
    assert json.loads(options.plugin_config) == {"NUM_STREAMS": "2"}


def test_generated_rerank_graph_round_trips() -> None:
    text = rerank_graph(RerankSettings("/models/x", max_allowed_chunks=7))
    options = options_of(text, RerankCalculatorOVOptions)
    assert isinstance(options, RerankCalculatorOVOptions)
    assert options.models_path == "/models/x" and options.max_allowed_chunks == 7
    default = options_of(rerank_graph(RerankSettings("./")), RerankCalculatorOVOptions)
    assert isinstance(default, RerankCalculatorOVOptions)
    assert default.max_allowed_chunks == 10000


def test_a_model_path_without_the_irs_is_refused(tmp_path: Path) -> None:
    options = options_of(OVMS_EMBEDDINGS_GRAPH, EmbeddingsCalculatorOVOptions)
    assert isinstance(options, EmbeddingsCalculatorOVOptions)
    with pytest.raises(ServableLoadError, match=r"has no openvino_model\.xml"):
        embeddings_config(options, tmp_path, "emb")


def write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize(
    ("files", "task"),
    [
        ({"config.json": {"architectures": ["BertModel"]}}, "embeddings"),
        ({"config.json": {"architectures": ["XLMRobertaForSequenceClassification"]}}, "rerank"),
        ({"config.json": {"architectures": ["LlamaForCausalLM"]}}, "text_generation"),
        (
            {
                "config.json": {"architectures": ["BertModel"]},
                "modules.json": [{"type": "sentence_transformers.cross_encoder.CrossEncoder"}],
            },
            "rerank",
        ),
        (
            {
                "config.json": {"architectures": ["Qwen3ForCausalLM"]},
                "modules.json": [{"type": "sentence_transformers.models.Pooling"}],
            },
            "embeddings",
        ),
        ({}, "text_generation"),
    ],
)
def test_task_inference(tmp_path: Path, files: dict[str, object], task: str) -> None:
    for name, data in files.items():
        write_json(tmp_path / name, data)
    assert infer_task(tmp_path) == task


def test_task_inference_on_the_fixture_and_a_gguf(tmp_path: Path) -> None:
    assert infer_task(TINY_CROSS_ENCODER) == "rerank"
    assert infer_task(tmp_path / "model.gguf") == "text_generation"


def test_single_model_mode_generates_the_task_graph_from_the_flags(tmp_path: Path) -> None:
    from graphrt.cli.main import build_parser
    from graphrt.cli.serve import settings_from
    from graphrt.server import StartupError, single_model_definition

    args = build_parser().parse_args(
        [
            "serve",
            "--model_path",
            str(TINY_CROSS_ENCODER),
            "--task",
            "embeddings",
            "--pooling",
            "LAST",
            "--truncate",
            "--normalize",
            "false",
            "--num_streams",
            "2",
        ]
    )
    settings = settings_from(args)
    copy = tmp_path / "model"
    copy.mkdir()
    (copy / "config.json").write_text("{}")
    definition = single_model_definition(settings, copy, "emb")
    assert definition.graph_text is not None and definition.graph_path is None
    options = options_of(definition.graph_text, EmbeddingsCalculatorOVOptions)
    assert isinstance(options, EmbeddingsCalculatorOVOptions)
    assert EmbeddingsCalculatorOVOptions.Pooling.Name(options.pooling) == "LAST"
    assert options.truncate and not options.normalize_embeddings
    assert options.models_path == str(copy.resolve())
    assert json.loads(options.plugin_config) == {"NUM_STREAMS": "2"}

    inferred = settings_from(build_parser().parse_args(["serve", "--max_allowed_chunks", "5"]))
    (copy / "config.json").write_text('{"architectures": ["BertForSequenceClassification"]}')
    rerank = single_model_definition(inferred, copy, "rr")
    assert rerank.graph_text is not None
    decoded = options_of(rerank.graph_text, RerankCalculatorOVOptions)
    assert isinstance(decoded, RerankCalculatorOVOptions) and decoded.max_allowed_chunks == 5

    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(StartupError, match="needs a model directory"):
        single_model_definition(settings, gguf, "x")
