"""`graphrt export image_generation|speech2text|text2speech`: OVMS's layout for image and audio
models.

Writes `<model_repository_path>/<model_name>/` holding the OpenVINO model (copied when the source
already is one, else converted by optimum-cli from the `graphrt[export]` extra: diffusers
pipelines with `text-to-image`, Whisper with `automatic-speech-recognition-with-past`, SpeechT5
with `text-to-audio` and its HiFi-GAN vocoder) and the task's graph.pbtxt (image_audio_graphs.py),
and adds the model to config.json, as export.py does for the other tasks and with its guarantees
(staged, moved in place only when everything succeeded). Image generation's LoRA adapters
(`--source_loras`) are copied, or downloaded with huggingface_hub, into `loras/<alias>/`, and
the graph names them there, as OVMS does.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphrt.export.image_audio_graphs import (
    CompositeLoraSetting,
    LoraSetting,
    LoraSource,
    media_graph,
    parse_source_loras,
)
from graphrt.export.task_flags import TaskFlags
from graphrt.export.text_tasks import (
    ExportError,
    ExportRequest,
    add_to_config,
    convert_hf,
    model_dir_for,
    staged,
)

logger = logging.getLogger(__name__)

DEFAULT_VOCODER = "microsoft/speecht5_hifigan"  # OVMS's export_model.py default


@dataclass
class MediaExportSettings:
    task: str
    flags: TaskFlags = field(default_factory=TaskFlags)
    plugin_config: dict[str, Any] = field(default_factory=dict)  # --plugin_config, parsed
    vocoder: str = DEFAULT_VOCODER


def is_openvino_model(path: Path) -> bool:
    """A directory that already holds OpenVINO IR (at its top or in a diffusers part)."""
    return path.is_dir() and (
        any(path.glob("openvino_*.xml")) or any(path.glob("*/openvino_model.xml"))
    )


def _fetch_lora(source: LoraSource, target: Path) -> str:
    """The adapter file under `target/loras/<alias>/`; its path relative to `target`."""
    directory = target / "loras" / source.alias
    directory.mkdir(parents=True, exist_ok=True)
    local = Path(source.source).expanduser()
    if local.is_file():
        if local.suffix != ".safetensors":
            raise ExportError(f"--source_loras {source.alias}: {local} is not a .safetensors file")
        shutil.copy2(local, directory / local.name)
        return f"loras/{source.alias}/{local.name}"
    if source.source.startswith(("http://", "https://")):
        raise ExportError(
            f"--source_loras {source.alias}: download the adapter and pass its file (URLs are "
            "not fetched)"
        )
    try:
        from huggingface_hub import (  # type: ignore[import-not-found,unused-ignore]
            hf_hub_download,
            list_repo_files,
        )
    except ImportError as error:
        raise ExportError(
            f"--source_loras {source.alias}: a Hugging Face adapter needs huggingface_hub "
            "(pip install 'graphrt[export]')"
        ) from error
    repo, _, filename = source.source.partition("@")
    try:
        if not filename:
            files = [f for f in list_repo_files(repo) if f.endswith(".safetensors")]
            if len(files) != 1:
                raise ExportError(
                    f"--source_loras {source.alias}: {repo} has {len(files)} .safetensors files; "
                    "name one as repo@file.safetensors"
                )
            filename = files[0]
        downloaded = Path(hf_hub_download(repo, filename, local_dir=directory))
    except ExportError:
        raise
    except Exception as error:  # the hub's errors: no network, no such repo or file
        raise ExportError(f"--source_loras {source.alias}: {error}") from error
    return downloaded.relative_to(target).as_posix()


def _convert(request: ExportRequest, settings: MediaExportSettings, target: Path) -> None:
    extra: list[str] = []
    if settings.task == "text2speech":
        if settings.flags.model_type == "kokoro":
            raise ExportError(
                "optimum-intel does not convert Kokoro: pass an OpenVINO Kokoro directory as "
                "--source_model"
            )
        extra = ["--model-kwargs", json.dumps({"vocoder": settings.vocoder})]
    extra += request.extra_quantization_params
    convert_hf(request.source_model, target, request.weight_format, settings.task, extra)


def export_media(request: ExportRequest) -> Path:
    """Do the export; returns the model directory."""
    settings = request.graph
    if not isinstance(settings, MediaExportSettings):
        raise ExportError("an image or audio export needs its task's settings")
    source = Path(request.source_model).expanduser()
    name, model_dir = model_dir_for(request, source)
    sources: list[LoraSource] = []
    composites: list[CompositeLoraSetting] = []
    if settings.flags.source_loras:
        if settings.task != "image_generation":
            raise ExportError("--source_loras applies to image_generation only")
        try:
            sources, composites = parse_source_loras(settings.flags.source_loras)
        except ValueError as error:
            raise ExportError(str(error)) from error
    with staged(model_dir) as staging:
        if is_openvino_model(source):
            shutil.copytree(source, staging, dirs_exist_ok=True)
        else:
            _convert(request, settings, staging)
        loras = [
            LoraSetting(lora.alias, _fetch_lora(lora, staging), lora.alpha) for lora in sources
        ]
        graph = media_graph(
            settings.task, "./", settings.flags, settings.plugin_config, loras, composites
        )
        (staging / "graph.pbtxt").write_text(graph, encoding="utf-8")
    if request.config_file_path is not None:
        add_to_config(request.config_file_path, name, model_dir)
    logger.info("exported %s to %s", name, model_dir)
    return model_dir
