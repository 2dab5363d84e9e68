"""OVMS's pull mode: `--source_model org/name` fetched from Hugging Face, laid out, configured.

As OVMS's `--pull` and pull-and-start (docs/pull_hf_models.md): the model lands in
`<model_repository_path>/<source_model>` with a graph.pbtxt written from the task flags, then
(without `--pull`) it is served. Downloads go through huggingface_hub, so they resume, share its
cache and honour its environment: `HF_ENDPOINT`, `HF_TOKEN`, `https_proxy`, `HF_HUB_OFFLINE`
(then only the cache is read). A repository holding an OpenVINO IR is copied; `--gguf_filename`
takes one GGUF file (a split model by its first part, `...-00001-of-00003.gguf`, brings the
rest); anything else is converted with optimum-cli (`graphrt[export]`), with `--weight-format`
and `--extra_quantization_params`. A model already in the repository is used without the
network (its graph.pbtxt rewritten from the flags, as re-running OVMS's pull does) unless
`--overwrite_models`. The model is assembled in a staging directory and moved in place only when
complete, so an error leaves nothing half-written; errors are one line saying what to do.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graphrt.export.text_tasks import (
    IR_MARKERS,
    ExportError,
    checked_model_dir,
    convert_hf,
    staged,
)

logger = logging.getLogger("graphrt")

_SPLIT_GGUF = re.compile(r"^(?P<stem>.*)-(?P<part>\d{5})-of-(?P<count>\d{5})\.gguf$")
# A graph generator: the model path it is for, and the models_path the graph should name.
GraphWriter = Callable[[Path, str], str]


class PullError(Exception):
    """The model cannot be pulled; the message says why and what to do."""


@dataclass(frozen=True)
class PullRequest:
    source_model: str
    repository: Path
    gguf_filename: str | None = None
    overwrite_models: bool = False
    weight_format: str = "int8"
    extra_quantization_params: str = ""
    task: str | None = None


def pull(request: PullRequest, write_graph: GraphWriter) -> Path:
    """The model's directory in the repository, fetched (or found) and with its graph.pbtxt."""
    try:
        model_dir = checked_model_dir(request.source_model, request.repository)
    except ExportError as error:
        raise PullError(str(error)) from None
    if _has_model(model_dir, request) and not request.overwrite_models:
        logger.info("%s is in the model repository already: using it", request.source_model)
        _write_graph(model_dir, _models_path(model_dir, request), write_graph)
        return model_dir
    with staged(model_dir) as staging:
        if request.gguf_filename:
            for file in _gguf_files(request):
                shutil.copyfile(file, staging / file.name)
        else:
            snapshot = _snapshot(request.source_model)
            if any((snapshot / marker).is_file() for marker in IR_MARKERS):
                shutil.copytree(snapshot, staging, dirs_exist_ok=True)  # the cache's links followed
            else:
                _convert(request, staging)
        _write_graph(staging, _models_path(staging, request), write_graph)
    logger.info("pulled %s into %s", request.source_model, model_dir)
    return model_dir


def _has_model(model_dir: Path, request: PullRequest) -> bool:
    """The model is there already: the GGUF file asked for, or an IR (or a graph) otherwise."""
    if request.gguf_filename:
        return (model_dir / Path(request.gguf_filename).name).is_file()
    markers = ("graph.pbtxt", *IR_MARKERS)
    return any((model_dir / name).is_file() for name in markers)


def _models_path(model_dir: Path, request: PullRequest) -> str:
    if request.gguf_filename:
        return f"./{Path(request.gguf_filename).name}"
    ggufs = sorted(model_dir.glob("*.gguf"))
    return f"./{ggufs[0].name}" if ggufs and not (model_dir / IR_MARKERS[0]).is_file() else "./"


def _write_graph(model_dir: Path, models_path: str, write_graph: GraphWriter) -> None:
    target = model_dir / models_path if models_path != "./" else model_dir
    text = write_graph(target, models_path)
    staging = model_dir / ".graph.pbtxt.tmp"
    staging.write_text(text, encoding="utf-8")
    staging.replace(model_dir / "graph.pbtxt")


def _explain(error: Exception, source: str, filename: str | None = None) -> PullError:
    """One line for each way a download fails."""
    from huggingface_hub import errors

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    if isinstance(error, errors.GatedRepoError):
        return PullError(f"{source} is gated: accept its terms on Hugging Face and set HF_TOKEN")
    if isinstance(error, errors.RepositoryNotFoundError):
        return PullError(
            f"{endpoint} has no model {source} (or it is private: set HF_TOKEN to a token that "
            "can read it)"
        )
    if isinstance(error, errors.RevisionNotFoundError):
        return PullError(f"{source} has no such revision")
    if isinstance(error, errors.LocalEntryNotFoundError):
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        what = f"{filename} of {source}" if filename else source
        if offline:
            return PullError(f"{what} is not in the Hugging Face cache and HF_HUB_OFFLINE is set")
        return PullError(
            f"cannot download {what} from {endpoint} (no network, or a proxy is needed: set "
            "https_proxy) and it is not in the Hugging Face cache"
        )
    if isinstance(error, errors.EntryNotFoundError):  # after its subclass LocalEntryNotFoundError
        return PullError(f"{source} has no file {filename}; pass one of its .gguf files")
    return PullError(f"downloading {source} failed: {type(error).__name__}: {error}")


def _snapshot(source: str) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(source))
    except Exception as error:  # huggingface_hub's errors, and the network's
        raise _explain(error, source) from None


def _gguf_files(request: PullRequest) -> list[Path]:
    """The GGUF file, or every part of a split one, from the cache or downloaded into it."""
    from huggingface_hub import hf_hub_download

    name = request.gguf_filename or ""
    split = _SPLIT_GGUF.match(name)
    names = [name]
    if split:
        if int(split["part"]) != 1:
            raise PullError(f"--gguf_filename names part {split['part']}: give the first part")
        count = int(split["count"])
        names = [f"{split['stem']}-{part:05d}-of-{count:05d}.gguf" for part in range(1, count + 1)]
    files = []
    for each in names:
        try:
            files.append(Path(hf_hub_download(request.source_model, each)))
        except Exception as error:  # huggingface_hub's errors, and the network's
            raise _explain(error, request.source_model, each) from None
    return files


def _convert(request: PullRequest, staging: Path) -> None:
    task = request.task or "text_generation"
    export_task = {"embeddings": "embeddings_ov", "rerank": "rerank_ov"}.get(task, task)
    try:
        convert_hf(
            request.source_model,
            staging,
            request.weight_format,
            export_task,
            shlex.split(request.extra_quantization_params),
        )
    except ExportError as error:
        raise PullError(str(error)) from None
