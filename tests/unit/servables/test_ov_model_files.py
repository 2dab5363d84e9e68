"""Classic model files: every format OpenVINO's frontends read, found in a version folder or
given as the file itself, and told apart from generative model folders.

The models are real, written by tools/classic_models.py; each is read and run with openvino.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servables.errors import ServableLoadError
from servables.ov_model.model import OpenVINOModel
from servables.ov_model.model_files import (
    find_model_file,
    is_classic_model,
    loose_model_files,
    version_folders,
    version_path,
)


@pytest.mark.parametrize("fmt", ["ir", "onnx", "tflite", "tf_frozen", "tf_saved_model", "paddle"])
async def test_every_format_is_found_and_served(
    fmt: str, tmp_path: Path, classic_models: Any
) -> None:
    written = classic_models.FORMATS[fmt](tmp_path / "1")
    found = find_model_file(tmp_path / "1")
    assert found == (written.parent if written.name == "saved_model.pb" else written)
    assert is_classic_model(tmp_path)
    model = OpenVINOModel("m", 1, tmp_path / "1")
    model.load()
    model.start()
    x = np.random.default_rng(0).standard_normal(classic_models.SHAPE).astype(np.float32)
    (name,) = (spec.name for spec in model.inputs)
    (result,) = (await model.infer({name: x})).values()
    np.testing.assert_allclose(result, classic_models.expected(x), rtol=1e-6)


def test_a_model_file_is_version_one(tmp_path: Path, classic_models: Any) -> None:
    onnx = classic_models.save_onnx(tmp_path)
    assert is_classic_model(onnx)
    assert version_folders(onnx) == [1]
    assert version_path(onnx, 1) == onnx
    assert find_model_file(onnx) == onnx
    xml = classic_models.save_ir(tmp_path / "ir")
    assert find_model_file(xml.with_suffix(".bin")) == xml  # the weights name the model too
    xml.with_suffix(".bin").unlink()
    with pytest.raises(ServableLoadError, match=r"needs model\.bin beside it"):
        find_model_file(xml)
    paddle = classic_models.save_paddle(tmp_path / "paddle")
    assert find_model_file(paddle.with_suffix(".pdiparams")) == paddle


def test_a_version_folder_holds_one_model_of_the_first_format_found(
    tmp_path: Path, classic_models: Any
) -> None:
    with pytest.raises(ServableLoadError, match=r"holds no model: expected one of \.xml, \.onnx"):
        find_model_file(tmp_path)
    classic_models.save_onnx(tmp_path)
    classic_models.save_ir(tmp_path)
    assert find_model_file(tmp_path).name == "model.xml"  # OVMS's order: IR before ONNX
    (tmp_path / "other.xml").write_text("")
    with pytest.raises(ServableLoadError, match=r"several \.xml files: model\.xml, other\.xml"):
        find_model_file(tmp_path)


def test_classic_and_generative_folders_are_told_apart(tmp_path: Path, classic_models: Any) -> None:
    classic = tmp_path / "resnet"
    classic_models.save_ir(classic / "1")
    (classic / "notes").mkdir()
    assert is_classic_model(classic)
    # An LLM exported by optimum holds openvino_model.xml beside Hugging Face's config.json.
    llm = tmp_path / "llm"
    classic_models.save_ir(llm)
    (llm / "config.json").write_text("{}")
    assert not is_classic_model(llm)
    genai_ir = tmp_path / "genai_ir"  # what openvino-genai writes from a GGUF: no config.json
    classic_models.save_ir(genai_ir)
    (genai_ir / "openvino_tokenizer.xml").write_text("")
    assert not is_classic_model(genai_ir) and not loose_model_files(genai_ir)
    graph = tmp_path / "graph"
    classic_models.save_ir(graph / "1")
    (graph / "graph.pbtxt").write_text("")
    assert not is_classic_model(graph)
    loose = tmp_path / "loose"  # model files but no version folder: not what OVMS serves
    classic_models.save_ir(loose)
    assert not is_classic_model(loose) and loose_model_files(loose)
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    assert not is_classic_model(gguf)
    assert not is_classic_model(tmp_path / "missing")
