"""`graphrt export embeddings_ov|rerank_ov` as a user runs it, and the exported models served.

The fp32 MiniLM export (rag_models, cached) is the model every embeddings test serves; here its
layout is checked, an int8 export is served in single-model mode (task and pooling inferred from
the files), a Hugging Face cross-encoder is exported and scores like the committed fixture, and an
OpenVINO directory is exported without the export extra.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from calculators.embeddings.embeddings_calculator_ov_pb2 import EmbeddingsCalculatorOVOptions
from graphruntime import ValidatedGraph, load_graph_config

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

Run = Callable[..., subprocess.CompletedProcess[str]]
ROOT = Path(__file__).resolve().parents[3]


def cosine(a: Any, b: Any) -> Any:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def test_embeddings_export_layout(minilm_repository: Path) -> None:
    model = minilm_repository / "minilm"
    for name in (
        "openvino_model.xml",
        "openvino_model.bin",
        "openvino_tokenizer.xml",
        "openvino_tokenizer.bin",
        "config.json",
        "graph.pbtxt",
        "modules.json",
        "1_Pooling/config.json",
    ):
        assert (model / name).is_file(), name
    config = json.loads((minilm_repository / "config.json").read_text())
    assert config["mediapipe_config_list"] == [{"name": "minilm", "base_path": "minilm"}]
    graph = ValidatedGraph.from_config(load_graph_config(model / "graph.pbtxt"))
    (node,) = graph.nodes
    assert node.calculator_name == "EmbeddingsCalculatorOV"
    options = graph.node_options(node, EmbeddingsCalculatorOVOptions)
    assert isinstance(options, EmbeddingsCalculatorOVOptions)
    # all-MiniLM-L6-v2 is a mean-pooling model: the export reads it from 1_Pooling/config.json.
    assert EmbeddingsCalculatorOVOptions.Pooling.Name(options.pooling) == "MEAN"
    assert options.normalize_embeddings and options.models_path == "./"


@pytest.fixture(scope="module")
def int8_server(
    rag_builder: Any,
    export_env: Any,
    minilm_source: Path,
    launch_exact: LaunchExact,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ExactServer]:
    """The int8 export, served in single-model mode from a copy without graph.pbtxt: the task
    (embeddings, from modules.json) and the pooling (MEAN) come from the model's files."""
    repository = rag_builder.export_minilm(export_env, minilm_source, "int8")
    model = tmp_path_factory.mktemp("int8") / "minilm-int8"
    shutil.copytree(repository / "minilm", model, ignore=shutil.ignore_patterns("graph.pbtxt"))
    args = ["--model_path", str(model), "--model_name", "minilm-int8", "--truncate"]
    with launch_exact(args, model="minilm-int8") as server:
        yield server


def test_int8_export_single_model_mode(
    int8_server: ExactServer, reference_embeddings: Any, sentences: tuple[str, ...]
) -> None:
    with int8_server.client() as client:
        reply = client.embeddings.create(model="minilm-int8", input=list(sentences))
        long = client.embeddings.create(model="minilm-int8", input="word " * 1000)
    similarity = cosine([item.embedding for item in reply.data], reference_embeddings)
    print(
        f"int8 cosine to sentence-transformers: min {similarity.min():.5f}, "
        f"mean {similarity.mean():.5f}"
    )
    assert similarity.min() >= 0.98, similarity
    assert long.usage.prompt_tokens == 512, "--truncate cuts the input to the context"


def test_hugging_face_cross_encoder_export_scores_like_the_fixture(
    rag_builder: Any, export_env: Any, tiny_cross_encoder: Path
) -> None:
    exported = rag_builder.export_tiny_cross_encoder(export_env) / "tiny-cross-encoder"
    assert (exported / "graph.pbtxt").is_file() and (exported / "openvino_tokenizer.xml").is_file()
    genai: Any = importlib.import_module("openvino_genai")
    config = genai.TextRerankPipeline.Config()
    config.top_n = 10
    query = "what is the capital of france?"
    documents = ["paris is the capital of france.", "the cat sits on the mat.", "rome is in italy"]
    fresh = genai.TextRerankPipeline(str(exported), "CPU", config).rerank(query, documents)
    committed = genai.TextRerankPipeline(str(tiny_cross_encoder), "CPU", config).rerank(
        query, documents
    )
    assert [index for index, _ in fresh] == [index for index, _ in committed]
    assert np.allclose([s for _, s in fresh], [s for _, s in committed], atol=1e-5)


def graphrt(*args: str, cwd: Path, path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PATH": path},
    )


def test_openvino_directory_needs_no_export_extra(tiny_cross_encoder: Path, tmp_path: Path) -> None:
    """Without optimum-cli anywhere on PATH: an OpenVINO directory is copied and gets its graph;
    a Hugging Face directory is refused with what to install."""
    bare_path = str(Path(sys.executable).parent) + ":/usr/bin:/bin"
    done = graphrt(
        "export",
        "rerank_ov",
        "--source_model",
        str(tiny_cross_encoder),
        "--model_name",
        "ce",
        "--model_repository_path",
        "models",
        "--config_file_path",
        "models/config.json",
        "--max_allowed_chunks",
        "99",
        cwd=tmp_path,
        path=bare_path,
    )
    assert done.returncode == 0, done.stderr
    graph = (tmp_path / "models" / "ce" / "graph.pbtxt").read_text()
    assert 'calculator: "RerankCalculatorOV"' in graph and "max_allowed_chunks: 99" in graph
    assert (tmp_path / "models" / "ce" / "openvino_model.bin").is_file()
    config = json.loads((tmp_path / "models" / "config.json").read_text())
    assert config["mediapipe_config_list"] == [{"name": "ce", "base_path": "ce"}]

    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text('{"architectures": ["BertModel"]}')
    refused = graphrt(
        "export",
        "embeddings_ov",
        "--source_model",
        str(hf),
        "--model_repository_path",
        "m2",
        cwd=tmp_path,
        path=bare_path,
    )
    assert refused.returncode == 1
    assert "graphrt[export]" in refused.stderr
    assert not (tmp_path / "m2" / "hf").exists(), "a failed export leaves no half-written model"
