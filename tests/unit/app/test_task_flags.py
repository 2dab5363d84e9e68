"""The task flags are declared once (graphrt/export/task_flags.py): both commands parse them to
the declared defaults, and each one reaches a graph writer's option of the same name, so a
renamed writer option cannot silently drop the flag that fed it."""

from __future__ import annotations

from dataclasses import fields

from graphrt.cli.main import build_parser
from graphrt.cli.options import task_flags_from
from graphrt.export.image_audio_graphs import (
    ImageGenerationSettings,
    SpeechToTextSettings,
    TextToSpeechSettings,
)
from graphrt.export.task_flags import TaskFlags, graph_options
from graphrt.export.text_graphs import EmbeddingsSettings, RerankSettings, TextGenerationSettings

WRITERS = (
    TextGenerationSettings,
    EmbeddingsSettings,
    RerankSettings,
    ImageGenerationSettings,
    SpeechToTextSettings,
    TextToSpeechSettings,
)
# Flags that reach the graph otherwise: the draft model's path (draft_models_path), the LoRA
# adapters (parsed into lora_adapters), and how `export text2speech` converts the model.
NOT_BY_NAME = {"draft_source_model", "source_loras", "model_type"}


def test_every_task_flag_is_a_graph_option_of_the_same_name() -> None:
    options = {option.name for writer in WRITERS for option in fields(writer)}
    flags = {flag.name for flag in fields(TaskFlags)}
    assert flags - NOT_BY_NAME <= options
    assert not NOT_BY_NAME & options


def test_serve_and_export_parse_to_the_declared_defaults() -> None:
    parser = build_parser()
    assert task_flags_from(parser.parse_args(["serve"])) == TaskFlags()
    export = ["export", "text_generation", "--source_model", "m"]
    assert task_flags_from(parser.parse_args(export)) == TaskFlags()


def test_export_spells_the_negative_flags_as_export_model_py() -> None:
    args = build_parser().parse_args(
        [
            "export",
            "embeddings_ov",
            "--source_model",
            "m",
            "--disable_dynamic_split_fuse",
            "--skip_normalize",
        ]
    )
    flags = task_flags_from(args)
    assert not flags.dynamic_split_fuse and not flags.normalize


def test_graph_options_take_the_flags_by_name_and_the_parsed_plugin_config() -> None:
    flags = TaskFlags(target_device="GPU", num_streams=3, max_allowed_chunks=7, pooling="MEAN")
    rerank = graph_options(flags, RerankSettings, "./", {"A": 1})
    assert rerank == RerankSettings("./", "GPU", 3, 7, {"A": 1})
    given = graph_options(flags, EmbeddingsSettings, "./", {}, target_device="NPU")
    assert (given.target_device, given.pooling, given.normalize) == ("NPU", "MEAN", True)
