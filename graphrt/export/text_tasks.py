"""`graphrt export text_generation|embeddings_ov|rerank_ov`: lay out a model as OVMS's
export_model.py does.

Writes `<model_repository_path>/<model_name>/` holding the model (a .gguf file, an OpenVINO IR
directory, or an IR converted from a Hugging Face model with optimum-intel) and the task's
graph.pbtxt, and adds `{"name", "base_path"}` to config.json's mediapipe_config_list, so
`graphrt serve --config_path <config.json>` (or OVMS itself) serves it.

Hugging Face conversion runs `optimum-cli` from the optional `graphrt[export]` extra (torch,
transformers, optimum-intel, openvino-tokenizers); serving never imports any of it, and an
already converted OpenVINO directory is copied without it. Embedding models keep their
sentence-transformers files (modules.json, 1_Pooling/), and the graph names the pooling they
were trained with unless `--pooling` says otherwise. A rerank model's tokenizer keeps its special
tokens and pair template (OVMS's script strips them and re-adds RoBERTa's by hand, which breaks
BERT cross-encoders); graphrt serves both layouts.

The model is written into a staging directory next to its target and moved in place only when the
whole export succeeded, so a failed export (with `--overwrite_models` too) leaves the model that was
there untouched. `--model_name` must stay inside the model repository (no absolute path, no `..`).
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from graphrt.export.text_graphs import (
    EmbeddingsSettings,
    RerankSettings,
    TextGenerationSettings,
    embeddings_graph,
    rerank_graph,
    text_generation_graph,
)
from servables.encoders.model_dir import detect_pooling

logger = logging.getLogger(__name__)

IR_MARKERS = ("openvino_model.xml", "openvino_language_model.xml")
# optimum's task per graphrt export task, and the sentence-transformers files to keep.
OPTIMUM_TASKS = {
    "text_generation": "text-generation-with-past",
    "embeddings_ov": "feature-extraction",
    "rerank_ov": "text-classification",
    "image_generation": "text-to-image",
    "speech2text": "automatic-speech-recognition-with-past",
    "text2speech": "text-to-audio",
}
SENTENCE_TRANSFORMERS_FILES = (
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling",
)


class ExportError(Exception):
    """The export cannot be done; the message says why and what to do."""


@dataclass
class ExportRequest:
    source_model: str
    model_repository_path: Path
    config_file_path: Path | None
    model_name: str | None
    weight_format: str
    # An image or audio task's settings are image_audio_tasks.MediaExportSettings.
    graph: TextGenerationSettings | EmbeddingsSettings | RerankSettings | Any
    overwrite_models: bool = False
    # More optimum-cli arguments for a Hugging Face source (export_model.py's
    # --extra_quantization_params), e.g. ("--sym", "--group-size", "-1", "--all-layers").
    extra_quantization_params: tuple[str, ...] = ()


def _is_ir_dir(path: Path) -> bool:
    return path.is_dir() and any((path / marker).is_file() for marker in IR_MARKERS)


def convert_hf(
    source: str, target: Path, weight_format: str, task: str, extra: Sequence[str] = ()
) -> None:
    """Hugging Face model (hub id or local checkpoint) → OpenVINO IR with optimum-intel;
    `extra`: more optimum-cli arguments (a vocoder for text-to-speech)."""
    if shutil.which("optimum-cli") is None:
        raise ExportError(
            "Exporting a Hugging Face model needs optimum-intel: `pip install 'graphrt[export]'` "
            "(see the README); a .gguf file or an OpenVINO IR directory needs nothing extra."
        )
    command = [
        "optimum-cli",
        "export",
        "openvino",
        "--model",
        source,
        "--task",
        OPTIMUM_TASKS[task],
        "--weight-format",
        weight_format,
        *extra,
        str(target),
    ]
    logger.info("running %s", " ".join(command))
    result = subprocess.run(command, check=False)
    if result.returncode != 0:
        raise ExportError(f"optimum-cli failed with exit code {result.returncode}")


def checked_model_dir(name: str, repository: Path) -> Path:
    """`repository / name`, refusing a name that would leave the repository."""
    path = PurePath(name)
    if not name.strip() or path.is_absolute() or ".." in path.parts or not path.parts:
        raise ExportError(
            f"model name {name!r} must be a relative path inside the model repository "
            "(no absolute path, no '..'); pass another --model_name"
        )
    model_dir = repository / path
    root = repository.resolve()
    resolved = model_dir.resolve()
    if resolved == root or not resolved.is_relative_to(root):
        raise ExportError(
            f"model name {name!r} leads outside the model repository {repository} "
            "(through a symbolic link?); pass another --model_name"
        )
    return model_dir


def model_dir_for(request: ExportRequest, source: Path) -> tuple[str, Path]:
    """The model's name and directory; an existing one is replaced only with overwrite_models
    (and only once the export succeeded, see staged)."""
    name = request.model_name or (source.stem if source.exists() else request.source_model)
    model_dir = checked_model_dir(name, request.model_repository_path)
    if (model_dir.exists() or model_dir.is_symlink()) and not request.overwrite_models:
        raise ExportError(f"{model_dir} exists; pass --overwrite_models to replace it")
    return name, model_dir


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


@contextmanager
def staged(model_dir: Path) -> Iterator[Path]:
    """A fresh directory next to `model_dir` to export into; on success it replaces
    `model_dir` (the old model is removed only then), on failure it is removed."""
    model_dir.parent.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    staging = model_dir.parent / f".{model_dir.name}.export-{tag}"
    staging.mkdir()
    try:
        yield staging
        old = model_dir.parent / f".{model_dir.name}.old-{tag}"
        replaced = model_dir.exists() or model_dir.is_symlink()
        if replaced:
            model_dir.rename(old)
        try:
            staging.rename(model_dir)
        except BaseException:
            if replaced:
                old.rename(model_dir)
            raise
        if replaced:
            _remove(old)
    except BaseException:
        _remove(staging)
        raise


def export_text_generation(request: ExportRequest) -> Path:
    """Do the export; returns the model directory."""
    source = Path(request.source_model).expanduser()
    name, model_dir = model_dir_for(request, source)
    settings = request.graph
    assert isinstance(settings, TextGenerationSettings)
    with staged(model_dir) as staging:
        if source.is_file() and source.suffix.lower() == ".gguf":
            shutil.copy2(source, staging / source.name)
            models_path = f"./{source.name}"
        elif _is_ir_dir(source):
            shutil.copytree(source, staging, dirs_exist_ok=True)
            models_path = "./"
        else:
            convert_hf(
                request.source_model,
                staging,
                request.weight_format,
                "text_generation",
                request.extra_quantization_params,
            )
            models_path = "./"
        settings.models_path = models_path
        (staging / "graph.pbtxt").write_text(text_generation_graph(settings), encoding="utf-8")
    if request.config_file_path is not None:
        add_to_config(request.config_file_path, name, model_dir)
    logger.info("exported %s to %s", name, model_dir)
    return model_dir


def _keep_sentence_transformers_files(source: Path, model_dir: Path) -> None:
    """optimum drops them; they say how the model pools (read at load when the graph does not)."""
    for name in SENTENCE_TRANSFORMERS_FILES:
        path = source / name
        if path.is_dir():
            shutil.copytree(path, model_dir / name, dirs_exist_ok=True)
        elif path.is_file():
            shutil.copy2(path, model_dir / name)


def export_encoder(request: ExportRequest, task: str) -> Path:
    """embeddings_ov / rerank_ov: the model IR, its tokenizer IRs and the task's graph."""
    source = Path(request.source_model).expanduser()
    name, model_dir = model_dir_for(request, source)
    settings = request.graph
    if not isinstance(settings, EmbeddingsSettings | RerankSettings):
        raise ExportError(f"{task} needs embeddings or rerank graph settings")
    with staged(model_dir) as staging:
        if _is_ir_dir(source):
            shutil.copytree(source, staging, dirs_exist_ok=True)
        else:
            convert_hf(
                request.source_model,
                staging,
                request.weight_format,
                task,
                request.extra_quantization_params,
            )
            if source.is_dir():
                _keep_sentence_transformers_files(source, staging)
        settings.models_path = "./"
        if isinstance(settings, EmbeddingsSettings):
            settings.pooling = settings.pooling or detect_pooling(staging)
            graph = embeddings_graph(settings)
        else:
            graph = rerank_graph(settings)
        (staging / "graph.pbtxt").write_text(graph, encoding="utf-8")
    if request.config_file_path is not None:
        add_to_config(request.config_file_path, name, model_dir)
    logger.info("exported %s to %s", name, model_dir)
    return model_dir


def add_to_config(config_path: Path, name: str, model_dir: Path) -> None:
    """Add or replace the mediapipe_config_list entry for `name` (paths relative to the file)."""
    if config_path.is_file():
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ExportError(f"{config_path} is not valid JSON: {error}") from error
    else:
        config = {"model_config_list": []}
    graphs = [
        entry
        for entry in config.setdefault("mediapipe_config_list", [])
        if entry.get("name") != name
    ]
    try:
        base_path = model_dir.resolve().relative_to(config_path.parent.resolve()).as_posix()
    except ValueError:
        base_path = str(model_dir.resolve())
    graphs.append({"name": name, "base_path": base_path})
    config["mediapipe_config_list"] = graphs
    config_path.parent.mkdir(parents=True, exist_ok=True)
    config_path.write_text(json.dumps(config, indent=4) + "\n", encoding="utf-8")
