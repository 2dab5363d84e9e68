"""OVMS's pull-and-start of an OpenVINO IR repository (as the OpenVINO organization publishes
them) from the Hugging Face cache, with the task detected from its files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tests.e2e.conftest import place_in_hf_cache

if TYPE_CHECKING:
    from conftest import LaunchExact

REPO = "OpenVINO/all-MiniLM-L6-v2-fp32-ov"


def test_an_ir_repository_is_copied_configured_and_served(
    tmp_path: Path,
    minilm_dir: Path,
    launch_exact: LaunchExact,
    reference_embeddings: Any,
    sentences: tuple[str, ...],
) -> None:
    files = {
        str(path.relative_to(minilm_dir)): path
        for path in minilm_dir.rglob("*")
        if path.is_file() and path.name != "graph.pbtxt"
    }
    place_in_hf_cache(tmp_path / "hf", REPO, files)
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    args = ["--source_model", REPO, "--model_repository_path", str(tmp_path / "models")]
    with launch_exact(args, model=REPO, env=env) as server, server.client() as client:
        reply = client.embeddings.create(model=REPO, input=list(sentences))
    vectors = np.array([item.embedding for item in reply.data])
    a, b = vectors.astype(np.float64), np.asarray(reference_embeddings, dtype=np.float64)
    similarity = (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)
    assert similarity.min() >= 0.999, similarity
    model_dir = tmp_path / "models" / REPO
    assert (model_dir / "openvino_model.xml").is_file() and not (
        model_dir / "openvino_model.xml"
    ).is_symlink()
    assert "EmbeddingsCalculatorOV" in (model_dir / "graph.pbtxt").read_text()
