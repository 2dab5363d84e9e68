"""`graphrt export`: export_model.py's flags, and writing the model directory they ask for.

Its own module so the command line's flag handling stays apart from the export itself
(graphrt/export/), and from the other subcommands.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from pathlib import Path

from graphrt.cli.options import add_task_arguments, task_flags_from
from graphrt.export.image_audio_graphs import MEDIA_TASKS
from graphrt.export.image_audio_tasks import DEFAULT_VOCODER, MediaExportSettings, export_media
from graphrt.export.task_flags import graph_options
from graphrt.export.text_graphs import (
    EmbeddingsSettings,
    RerankSettings,
    TextGenerationSettings,
)
from graphrt.export.text_tasks import (
    ExportError,
    ExportRequest,
    export_encoder,
    export_text_generation,
)

__all__ = ["add_export_arguments", "export_graph_settings", "run_export"]

logger = logging.getLogger("graphrt")


def export_graph_settings(
    args: argparse.Namespace, plugin_config: dict[str, object]
) -> TextGenerationSettings | EmbeddingsSettings | RerankSettings | MediaExportSettings:
    flags = task_flags_from(args)
    if args.task in MEDIA_TASKS:
        return MediaExportSettings(args.task, flags, plugin_config, args.vocoder)
    settings_type = {"embeddings_ov": EmbeddingsSettings, "rerank_ov": RerankSettings}.get(
        args.task, TextGenerationSettings
    )
    return graph_options(flags, settings_type, "", plugin_config)


def run_export(args: argparse.Namespace) -> int:
    plugin_config = json.loads(args.plugin_config) if args.plugin_config else {}
    request = ExportRequest(
        source_model=args.source_model,
        model_repository_path=Path(args.model_repository_path),
        config_file_path=Path(args.config_file_path) if args.config_file_path else None,
        model_name=args.model_name,
        weight_format=args.weight_format,
        overwrite_models=args.overwrite_models,
        graph=export_graph_settings(args, plugin_config),
        extra_quantization_params=tuple(shlex.split(args.extra_quantization_params)),
    )
    try:
        if args.task == "text_generation":
            export_text_generation(request)
        elif args.task in MEDIA_TASKS:
            export_media(request)
        else:
            export_encoder(request, args.task)
    except ExportError as error:
        logger.error("%s", error)
        return 1
    return 0


def add_export_arguments(export: argparse.ArgumentParser) -> None:
    """export_model.py's tasks and their flags."""
    export.add_argument(
        "task",
        choices=["text_generation", "embeddings_ov", "rerank_ov", *MEDIA_TASKS],
        help="what the model is for: the graph written next to it",
    )
    export.add_argument(
        "--source_model",
        required=True,
        help=".gguf file, OpenVINO IR directory, or Hugging Face model",
    )
    export.add_argument(
        "--model_repository_path", default="models", help="where the model directory is written"
    )
    export.add_argument("--config_file_path", help="config.json to add the model to")
    export.add_argument("--model_name", help="default: the source file or directory name")
    export.add_argument(
        "--weight-format",
        dest="weight_format",
        default="int8",
        choices=["fp32", "fp16", "int8", "int4"],
        help="for Hugging Face sources",
    )
    export.add_argument(
        "--extra_quantization_params",
        default="",
        help="more optimum-cli arguments for Hugging Face sources, e.g. "
        "'--sym --group-size -1 --ratio 1.0 --all-layers' (int4 channel-wise, every layer)",
    )
    export.add_argument(
        "--overwrite_models",
        action="store_true",
        help="replace a model directory that already exists",
    )
    add_task_arguments(export, "export")
    export.add_argument(
        "--disable_dynamic_split_fuse",
        dest="dynamic_split_fuse",
        action="store_false",
        help="do not split long prompts over steps",
    )
    export.add_argument(
        "--vocoder",
        default=DEFAULT_VOCODER,
        help="text2speech: the SpeechT5 vocoder (a Hugging Face model or directory)",
    )
    export.add_argument(
        "--skip_normalize",
        dest="normalize",
        action="store_false",
        help="embeddings_ov: do not L2-normalise (export_model.py's flag)",
    )
