"""A model directory holding OVMS's own graph.pbtxt (demos/continuous_batching) is served as is:
`graphrt serve --model_path <dir>` runs the file unchanged, `models_path` relative to it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from openai.types.chat import ChatCompletionMessageParam

if TYPE_CHECKING:
    from conftest import Golden, Launch, Server

ITALY: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "What is the capital of Italy?"}
]

# OVMS's demos/continuous_batching/graph.pbtxt, except for models_path (relative, to a GGUF in a
# sibling directory) and cache_size (1 GB instead of 10). Note the missing commas after
# enable_prefix_caching and cache_size: OVMS's file has them missing too.
GRAPH = """input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"

node: {
  name: "LLMExecutor"
  calculator: "HttpLLMCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }
  node_options: {
      [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {
          models_path: "../models/MODEL_FILE",
          plugin_config: '{"KV_CACHE_PRECISION": "u8", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}',
          enable_prefix_caching: false
          cache_size: 1
      }
  }
  input_stream_handler {
    input_stream_handler: "SyncSetInputStreamHandler",
    options {
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {
        sync_set {
          tag_index: "LOOPBACK:0"
        }
      }
    }
  }
}
"""


@pytest.fixture(scope="module")
def graph_dir(tiny_llm_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """OVMS's demo layout, with the tiny random llama: what is tested is the graph file's
    handling, which any deterministic model shows."""
    root = tmp_path_factory.mktemp("ovms_layout")
    models = root / "models"
    models.mkdir()
    os.symlink(tiny_llm_gguf, models / tiny_llm_gguf.name)
    servable = root / "smollm2"
    servable.mkdir()
    (servable / "graph.pbtxt").write_text(
        GRAPH.replace("MODEL_FILE", tiny_llm_gguf.name), encoding="utf-8"
    )
    return servable


@pytest.fixture(scope="module")
def graph_server(graph_dir: Path, launch: Launch) -> Iterator[Server]:
    with launch(["--model_path", str(graph_dir)]) as server:
        yield server


def test_chat_matches_golden(graph_server: Server, tiny_golden: Golden) -> None:
    expected = tiny_golden.chat(ITALY, 30)
    with graph_server.client() as client:
        response = client.chat.completions.create(
            model=graph_server.model, messages=ITALY, temperature=0, max_tokens=30
        )
    assert response.choices[0].message.content == expected.text
    assert response.usage is not None
    assert response.usage.completion_tokens == expected.completion_tokens


def test_streaming_completion_matches_golden(graph_server: Server, tiny_golden: Golden) -> None:
    expected = tiny_golden.completion("Once upon a time", 16)
    with (
        graph_server.client() as client,
        client.completions.create(
            model=graph_server.model,
            prompt="Once upon a time",
            temperature=0,
            max_tokens=16,
            stream=True,
        ) as stream,
    ):
        text = "".join(chunk.choices[0].text for chunk in stream if chunk.choices)
    assert text == expected.text


def test_model_is_listed(graph_server: Server) -> None:
    with graph_server.client() as client:
        assert [model.id for model in client.models.list().data] == [graph_server.model]
