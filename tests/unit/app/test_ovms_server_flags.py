"""OVMS's server flags (graphrt/cli/ovms_server_flags.py): every one parses; each either maps
onto graphrt's settings or stops the start with the reason."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from calculators.plugin_config import parse_plugin_config
from graphrt.cli.main import build_parser
from graphrt.cli.ovms_server_flags import openvino_settings
from graphrt.cli.serve import settings_from
from graphrt.server import StartupError
from graphrt.serving.settings import GrpcSettings, ServerSettings
from servables import openvino_defaults
from servables.openvino_defaults import OpenVinoDefaults


def settings(*flags: str) -> ServerSettings:
    return settings_from(build_parser().parse_args(["serve", *flags]))


def test_the_grpc_flags_become_grpcio_settings() -> None:
    given = settings(
        "--grpc_channel_arguments",
        "grpc.max_connection_age_ms=2000, grpc.primary_user_agent=ovms-client",
        "--grpc_max_threads",
        "8",
        "--grpc_workers",
        "1",
    )
    assert given.grpc == GrpcSettings(
        channel_arguments=(
            ("grpc.max_connection_age_ms", 2000),
            ("grpc.primary_user_agent", "ovms-client"),
        ),
        max_concurrent_rpcs=8,
    )
    assert settings().grpc == GrpcSettings()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--grpc_workers", "4"], "--grpc_workers 4 is not supported by graphrt: graphrt has one"),
        (["--grpc_memory_quota", "1073741824"], "resource quota exists in its C++ API only"),
        (["--trace_path", "trace.json"], "--trace_dir DIR writes a Chrome trace"),
        (["--grpc_channel_arguments", "grpc.a=1,broken"], "'broken' is not key=value"),
        (["--grpc_max_threads", "0"], "--grpc_max_threads must be 1 or more"),
        (
            ["--cpu_extension", "/no/such/lib.so"],
            "File path provided as an --cpu_extension parameter does not exist in the "
            "filesystem: /no/such/lib.so",
        ),
    ],
)
def test_flags_graphrt_cannot_honour_stop_the_start_saying_why(
    flags: list[str], message: str
) -> None:
    with pytest.raises(StartupError) as refused:
        settings(*flags)
    assert message in str(refused.value)


def test_a_library_openvino_cannot_load_stops_the_start(tmp_path: Path) -> None:
    library = tmp_path / "not_a_library.so"
    library.write_bytes(b"not ELF")
    with pytest.raises(StartupError, match="OpenVINO cannot load it") as refused:
        settings("--cpu_extension", str(library))
    assert "core.cpp" not in str(refused.value)  # OpenVINO's source locations left out


def test_the_cache_dir_is_ovms_default_when_that_directory_exists(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve"])
    missing = tmp_path / "opt-cache"
    assert openvino_settings(args, missing).cache_dir is None
    missing.mkdir()
    assert openvino_settings(args, missing).cache_dir == str(missing)
    given = build_parser().parse_args(["serve", "--cache_dir", "relative/cache"])
    assert openvino_settings(given, missing).cache_dir == str(Path("relative/cache").resolve())


@pytest.fixture
def cache_dir_set() -> Iterator[str]:
    openvino_defaults.configure(OpenVinoDefaults(cache_dir="/srv/cache"))
    yield "/srv/cache"
    openvino_defaults.configure(OpenVinoDefaults())


def test_every_plugin_config_gets_the_cache_dir_unless_it_names_its_own(cache_dir_set: str) -> None:
    assert parse_plugin_config("") == {"CACHE_DIR": cache_dir_set}
    assert parse_plugin_config('{"NUM_STREAMS": "1"}') == {
        "NUM_STREAMS": "1",
        "CACHE_DIR": cache_dir_set,
    }
    assert parse_plugin_config('{"CACHE_DIR": "/graph/own"}') == {"CACHE_DIR": "/graph/own"}


def test_without_a_cache_dir_plugin_config_is_as_written() -> None:
    assert parse_plugin_config('{"NUM_STREAMS": "1"}') == {"NUM_STREAMS": "1"}
