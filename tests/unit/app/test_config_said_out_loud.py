"""Nothing in config.json is ignored in silence: what graphrt does not do is a warning or an
error naming the key, and the `monitoring` section is read with OVMS's rules."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from graphrt.server import StartupError, metrics_of, monitoring_of
from graphrt.serving.model_repository import (
    ConfigFileError,
    ModelRepository,
    read_config,
    read_monitoring,
)
from graphrt.serving.monitoring import Monitoring
from graphrt.serving.settings import ServerSettings


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


# ------------------------------------------------------------------------------ monitoring


def test_monitoring_is_read_with_its_metrics_list(tmp_path: Path) -> None:
    metrics = {"enable": True, "metrics_list": ["ovms_requests_success", "ovms_streams"]}
    path = write(tmp_path, monitoring={"metrics": metrics})
    assert read_monitoring(path) == Monitoring(True, ("ovms_requests_success", "ovms_streams"))
    assert read_monitoring(write(tmp_path)) is None


@pytest.mark.parametrize(
    ("section", "detail"),
    [
        ({}, "'monitoring' must be an object with exactly the key 'metrics'"),
        ({"metrics": {}}, "monitoring.metrics.enable is required"),
        ({"metrics": {"enable": "yes"}}, "monitoring.metrics.enable is required"),
        ({"metrics": {"enable": True, "endpoint": "/m"}}, "unknown key 'endpoint'"),
        (
            {"metrics": {"enable": True, "metrics_list": ["ovms_nothing"]}},
            "monitoring.metrics.metrics_list: 'ovms_nothing' is not a metric family",
        ),
    ],
)
def test_a_wrong_monitoring_section_refuses_the_file(
    tmp_path: Path, section: dict[str, Any], detail: str
) -> None:
    with pytest.raises(ConfigFileError) as info:
        read_config(write(tmp_path, monitoring=section))
    assert detail in info.value.message


def test_monitoring_and_the_metrics_flags_together_are_refused_as_ovms_does(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, monitoring={"metrics": {"enable": True}})
    assert monitoring_of(ServerSettings(), path) == Monitoring(True)
    with pytest.raises(StartupError, match="Metrics configuration duplicated"):
        monitoring_of(ServerSettings(metrics_enable=True), path)
    assert monitoring_of(ServerSettings(metrics_enable=True), write(tmp_path)) is None


def test_an_unknown_metrics_list_family_stops_the_server_with_a_message() -> None:
    with pytest.raises(StartupError, match="unknown metrics in --metrics_list: ovms_nope"):
        metrics_of(ServerSettings(metrics_enable=True, metrics_list=["ovms_nope"]))


async def test_a_reload_that_changes_monitoring_says_it_needs_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path, monitoring={"metrics": {"enable": True}})
    repository = ModelRepository(path, monitoring=read_monitoring(path))
    with caplog.at_level(logging.WARNING):
        await repository.reload()
        assert "monitoring" not in caplog.text
        write(tmp_path, monitoring={"metrics": {"enable": False}})
        await repository.reload()
    assert "the monitoring section changed; it is read once, when the server starts" in caplog.text
    await repository.close()
