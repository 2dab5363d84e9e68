"""OVMS's server flags beyond models and endpoints: the version, a log file, gRPC tuning,
OpenVINO's model cache and CPU extensions, and minitrace.

An OVMS command line must start graphrt, so every one of these flags of OVMS's
docs/parameters.md parses, and either does what OVMS says, mapped onto graphrt's parts, or stops
the start with the reason (never argparse's "unrecognized arguments"):

* `--version` prints graphrt's, OpenVINO's and openvino-genai's versions and exits, as OVMS
  prints its own and its backends'.
* `--log_path FILE`: log lines go to FILE as well as to the console, the engine processes' too
  (OVMS writes both); the file is appended to.
* `--grpc_channel_arguments k=v,...` are channel arguments of the KServe gRPC server (values
  that are integers passed as integers, as OVMS does); they override graphrt's own message-size
  limits, which come from --max_request_size.
* `--grpc_max_threads N`: OVMS's gRPC server handles each call on a thread of a pool of at most
  N, and refuses calls past it with RESOURCE_EXHAUSTED. graphrt's handles calls on its event
  loop, so N bounds the calls in progress at once (grpcio's `maximum_concurrent_rpcs`), with the
  same refusal past it.
* `--grpc_workers`: OVMS starts that many gRPC servers on the port; graphrt has one, on its
  event loop (the engines work in processes of their own), so 1 is taken and more are refused.
* `--grpc_memory_quota` is refused: gRPC's resource quota exists in its C++ API only, not in
  grpcio's; --max_request_size bounds each message.
* `--cache_dir DIR` is OpenVINO's compiled-model cache (`CACHE_DIR`) for every model whose graph
  or plugin_config does not set its own; without the flag, /opt/cache when that directory
  exists (OVMS's default; graphrt's container image creates it) and is writable.
* `--cpu_extension LIB` is a library of custom operations, loaded into the OpenVINO core of the
  models of model_config_list (OVMS's core): checked at start.
* `--trace_path` is refused: OVMS has it only when built with minitrace, for a trace of its own
  C++ functions; graphrt's trace of every graph run is `--trace_dir`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, NoReturn

from graphrt.server import StartupError
from graphrt.serving.settings import GrpcSettings
from servables.errors import readable_message
from servables.openvino_defaults import OpenVinoDefaults

__all__ = ["add_ovms_server_arguments", "grpc_settings", "openvino_settings", "versions"]

OVMS_CACHE_DIR = Path("/opt/cache")  # used when it exists and --cache_dir is not given

logger = logging.getLogger("graphrt")


def versions() -> str:
    """What --version prints: graphrt's version and its backends' (OVMS's layout)."""
    import openvino
    import openvino_genai

    return (
        f"graphrt {metadata.version('graphrt')}\n"
        f"OpenVINO backend {openvino.get_version()}\n"
        f"OpenVINO GenAI backend {openvino_genai.__version__}\n"
    )


class _PrintVersions(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        sys.stdout.write(versions())
        parser.exit(0)


def add_ovms_server_arguments(serve: argparse.ArgumentParser) -> None:
    """The flags of the module docstring (serve's, so that OVMS's flag-only command lines,
    which `graphrt` reads as `graphrt serve ...`, take them)."""
    group = serve.add_argument_group("OVMS server flags (see docs/deployment.md)")
    group.add_argument(
        "--version",
        action=_PrintVersions,
        help="print graphrt's, OpenVINO's and openvino-genai's versions and exit",
    )
    group.add_argument(
        "--log_path",
        metavar="FILE",
        help="also write the log to FILE (appended), the engine processes' lines included",
    )
    group.add_argument(
        "--grpc_channel_arguments",
        metavar="K=V[,K=V]",
        help="gRPC channel arguments of the KServe gRPC server, e.g. "
        "grpc.max_connection_age_ms=2000 (integers passed as integers)",
    )
    group.add_argument(
        "--grpc_max_threads",
        type=int,
        metavar="N",
        help="gRPC calls in progress at once; more are refused with RESOURCE_EXHAUSTED (OVMS: "
        "its gRPC thread pool; graphrt handles calls on its event loop)",
    )
    group.add_argument(
        "--grpc_workers",
        type=int,
        default=1,
        help="gRPC servers: 1 (graphrt's one gRPC server runs on its event loop; more are refused)",
    )
    group.add_argument(
        "--grpc_memory_quota",
        type=int,
        metavar="BYTES",
        help="refused: grpcio has no memory quota (gRPC's C++ API does); --max_request_size "
        "bounds each message",
    )
    group.add_argument(
        "--cache_dir",
        metavar="DIR",
        help="OpenVINO's compiled-model cache for every model (a graph's plugin_config CACHE_DIR "
        f"wins); default: {OVMS_CACHE_DIR} if it exists",
    )
    group.add_argument(
        "--cpu_extension",
        metavar="LIB",
        help="library of custom OpenVINO operations for the models of model_config_list",
    )
    group.add_argument(
        "--trace_path",
        metavar="FILE",
        help="refused: OVMS's minitrace of its own functions (MTR builds only); graphrt traces "
        "graph runs with --trace_dir",
    )


def _refuse(flag: str, why: str) -> NoReturn:
    raise StartupError(f"{flag} is not supported by graphrt: {why}")


def _channel_arguments(text: str | None) -> tuple[tuple[str, int | str], ...]:
    arguments: list[tuple[str, int | str]] = []
    for item in text.split(",") if text else ():
        key, equals, value = item.strip().partition("=")
        if not equals or not key.strip() or not value.strip():
            raise StartupError(
                f"--grpc_channel_arguments: {item.strip()!r} is not key=value (e.g. "
                "grpc.max_connection_age_ms=2000)"
            )
        value = value.strip()
        try:
            arguments.append((key.strip(), int(value)))
        except ValueError:
            arguments.append((key.strip(), value))
    return tuple(arguments)


def grpc_settings(args: argparse.Namespace) -> GrpcSettings:
    if args.grpc_memory_quota is not None:
        _refuse(
            "--grpc_memory_quota",
            "gRPC's resource quota exists in its C++ API only, not in grpcio's; "
            "--max_request_size bounds each message",
        )
    if args.grpc_workers != 1:
        _refuse(
            f"--grpc_workers {args.grpc_workers}",
            "graphrt has one gRPC server, on its event loop (the engines run in processes of "
            "their own); leave it at 1",
        )
    if args.grpc_max_threads is not None and args.grpc_max_threads < 1:
        raise StartupError("--grpc_max_threads must be 1 or more")
    channel = _channel_arguments(args.grpc_channel_arguments)
    return GrpcSettings(channel_arguments=channel, max_concurrent_rpcs=args.grpc_max_threads)


def openvino_settings(
    args: argparse.Namespace, default_cache_dir: Path = OVMS_CACHE_DIR
) -> OpenVinoDefaults:
    """--cache_dir (or OVMS's /opt/cache when it exists) and --cpu_extension, checked."""
    if args.trace_path is not None:
        _refuse(
            "--trace_path",
            "it is OVMS's minitrace of its own functions (MTR builds only); "
            "--trace_dir DIR writes a Chrome trace of every graph run",
        )
    cache_dir = args.cache_dir
    if cache_dir is None and default_cache_dir.is_dir():
        if os.access(default_cache_dir, os.W_OK):
            cache_dir = str(default_cache_dir)
        else:  # e.g. a read-only root filesystem with nothing mounted there
            logger.warning("%s exists but is not writable: no model cache", default_cache_dir)
    if cache_dir is not None:
        cache_dir = str(Path(cache_dir).resolve())
    extension = args.cpu_extension
    if extension is not None:
        if not os.path.isfile(extension):
            raise StartupError(
                f"File path provided as an --cpu_extension parameter does not exist in the "
                f"filesystem: {extension}"
            )
        extension = str(Path(extension).resolve())
        _check_extension(extension)
    return OpenVinoDefaults(cache_dir=cache_dir, cpu_extension=extension)


def _check_extension(path: str) -> None:
    """Load the library once now, so a bad one stops the start instead of every model load."""
    import openvino

    try:
        openvino.Core().add_extension(path)
    except RuntimeError as error:
        reason = readable_message(str(error))
        raise StartupError(f"--cpu_extension {path}: OpenVINO cannot load it: {reason}") from error
