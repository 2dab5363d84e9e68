"""Nothing in config.json is ignored in silence: what graphrt does not do is a warning or an
error naming the key."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from graphrt.serving.model_repository import ConfigFileError, read_config


def write(tmp_path: Path, **data: Any) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_config_list": [], **data}), encoding="utf-8")
    return path


def model(**config: Any) -> list[dict[str, Any]]:
    return [{"config": {"name": "m", "base_path": "m", **config}}]


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ({"stateful": False}, "model_config_list[0].config.stateful is ignored"),
        ({"low_latency_transformation": True}, "low_latency_transformation is ignored"),
        ({"max_sequence_number": 10}, "max_sequence_number is ignored"),
        ({"idle_sequence_cleanup": False}, "idle_sequence_cleanup is ignored"),
        ({"allow_cache": True}, "allow_cache is ignored: graphrt keeps no compiled-model cache"),
    ],
)
def test_model_keys_graphrt_does_not_use_are_warnings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, config: dict[str, Any], detail: str
) -> None:
    with caplog.at_level(logging.WARNING):
        (found,) = read_config(write(tmp_path, model_config_list=model(**config)))
    assert found.name == "m"
    assert detail in caplog.text and str(tmp_path / "config.json") in caplog.text


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ({"stateful": True}, "model_config_list[0].config.stateful: graphrt serves no stateful"),
        (
            {"custom_loader_options": {"loader_name": "decrypt"}},
            "model_config_list[0].config.custom_loader_options: graphrt does not load OVMS's "
            "custom loader libraries",
        ),
    ],
)
def test_model_keys_that_would_serve_something_else_are_errors(
    tmp_path: Path, config: dict[str, Any], detail: str
) -> None:
    with pytest.raises(ConfigFileError) as info:
        read_config(write(tmp_path, model_config_list=model(**config)))
    assert detail in info.value.message


def test_library_lists_are_warnings_naming_each_library(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    loaders = [{"config": {"loader_name": "decrypt", "library_path": "/lib/libdecrypt.so"}}]
    libraries = [{"name": "crop", "base_path": "/lib/libcrop.so"}]
    with caplog.at_level(logging.WARNING):
        read_config(
            write(
                tmp_path,
                custom_loader_config_list=loaders,
                custom_node_library_config_list=libraries,
            )
        )
    assert "custom_loader_config_list is not loaded" in caplog.text
    assert "decrypt (/lib/libdecrypt.so)" in caplog.text
    assert "custom_node_library_config_list is not loaded" in caplog.text
    assert "crop (/lib/libcrop.so)" in caplog.text
