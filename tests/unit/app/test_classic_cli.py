"""Classic models from the command line: OVMS's quick start and parameter-page flags make the
same model entry config.json would, task detection tells a classic model from a generative one,
and flags that cannot apply are refused with a message naming them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphrt.cli.main import build_parser
from graphrt.cli.ovms_modes import run_mode
from graphrt.cli.serve import settings_from
from graphrt.server import StartupError, definitions_for
from graphrt.serving.graph_servable import GraphDefinition
from graphrt.serving.model_repository import read_config
from servables.ov_model.preprocessing import LayoutSetting
from servables.ov_model.versions import ModelConfig, VersionPolicy

PARAMETERS = [
    "--layout", "NHWC:NCHW",
    "--mean", "[123.675,116.28,103.53]",
    "--scale", "[58.395,57.12,57.375]",
    "--color_format", "RGB:BGR",
    "--precision", "UINT8:FP32",
    "--shape", "(1,224,224,3)",
    "--nireq", "4",
    "--model_version_policy", '{"all": {}}',
    "--target_device", "CPU",
    "--plugin_config", '{"NUM_STREAMS": 1}',
]  # fmt: skip


def served(*flags: str) -> list[Any]:
    args = build_parser().parse_args(["serve", *flags])
    definitions, _ = definitions_for(settings_from(args))
    return definitions


def test_the_quick_start_serves_a_folder_of_versions_as_a_classic_model(
    tmp_path: Path, classic_models: Any
) -> None:
    classic_models.image_model(tmp_path / "resnet50" / "1")
    folder = str(tmp_path / "resnet50")
    (config,) = served("--model_name", "resnet", "--model_path", folder, "--port", "9000")
    assert isinstance(config, ModelConfig)
    assert (config.name, config.base_path, config.nireq) == ("resnet", Path(folder), 0)


def test_the_parameters_page_flags_reach_the_model(tmp_path: Path, classic_models: Any) -> None:
    classic_models.image_model(tmp_path / "resnet50" / "1")
    (config,) = served(
        "--model_name", "resnet", "--model_path", str(tmp_path / "resnet50"), *PARAMETERS
    )
    assert isinstance(config, ModelConfig)
    steps = config.preprocessing
    assert steps.layout == LayoutSetting("NHWC", "NCHW")
    assert steps.mean == (123.675, 116.28, 103.53) and steps.scale == (58.395, 57.12, 57.375)
    assert (steps.color_format, steps.precision) == (("RGB", "BGR"), ("UINT8", "FP32"))
    assert (config.shape, config.nireq, config.version_policy) == (
        "(1,224,224,3)",
        4,
        VersionPolicy("all"),
    )
    assert config.plugin_config == {"NUM_STREAMS": 1}


def test_add_to_config_writes_what_serving_reads(tmp_path: Path, classic_models: Any) -> None:
    classic_models.image_model(tmp_path / "resnet50" / "1")
    folder, config_path = tmp_path / "resnet50", tmp_path / "config.json"
    flags = ["--model_name", "resnet", "--model_path", str(folder), *PARAMETERS]
    args = build_parser().parse_args(
        ["serve", "--add_to_config", "--config_path", str(config_path), *flags]
    )
    assert run_mode(args, settings_from(args)) == 0
    entry = json.loads(config_path.read_text())["model_config_list"][0]["config"]
    assert entry["mean"] == "[123.675,116.28,103.53]"  # OVMS's strings, as given
    assert read_config(config_path) == served(*flags)


def test_a_model_file_is_served_as_version_one(tmp_path: Path, classic_models: Any) -> None:
    onnx = classic_models.save_onnx(tmp_path)
    (config,) = served("--model_path", str(onnx))
    assert isinstance(config, ModelConfig)
    assert (config.name, config.base_path) == ("model", onnx)


def test_generative_folders_are_still_graphs(tmp_path: Path, classic_models: Any) -> None:
    graph = tmp_path / "graph"
    classic_models.image_model(graph / "1")
    (graph / "graph.pbtxt").write_text('input_stream: "in"')
    (definition,) = served("--model_path", str(graph))
    assert isinstance(definition, GraphDefinition)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--layout", "NHWC:NCHW"], "--layout is a classic model's parameter"),
        (["--task", "text_generation", "--mean", "1"], "--mean is a classic model's parameter"),
    ],
)
def test_classic_flags_for_a_graph_are_refused(
    tmp_path: Path, classic_models: Any, flags: list[str], message: str
) -> None:
    llm = tmp_path / "llm"
    classic_models.save_ir(llm)
    (llm / "config.json").write_text("{}")  # an LLM folder: Hugging Face's config.json
    with pytest.raises(StartupError, match=message):
        served("--model_path", str(llm), *flags)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model_version_policy", '{"newest": {}}'], "--unknown model_version_policy 'newest'"),
        (["--mean", "[1,x]"], "--mean .* must be a number or a list"),
        (["--color_format", "RGB"], "--color_format 'RGB' must be TARGET:SOURCE"),
        (["--nireq", "-1"], "--nireq must be a non-negative integer"),
    ],
)
def test_bad_values_are_refused_at_startup(
    tmp_path: Path, classic_models: Any, flags: list[str], message: str
) -> None:
    classic_models.image_model(tmp_path / "m" / "1")
    with pytest.raises(StartupError, match=message):
        served("--model_path", str(tmp_path / "m"), *flags)


def test_a_config_file_takes_no_model_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"model_config_list": []}')
    with pytest.raises(StartupError, match="--config_path and --layout cannot be used together"):
        served("--config_path", str(config), "--layout", "NHWC")


def test_model_files_without_a_version_folder_get_a_hint(
    tmp_path: Path, classic_models: Any
) -> None:
    classic_models.save_onnx(tmp_path / "loose")
    with pytest.raises(StartupError, match=r"no version folders: move them into .*loose/1"):
        served("--model_path", str(tmp_path / "loose"))
