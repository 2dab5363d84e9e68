"""`graphrt serve`: OVMS's flags, the server settings they make, and starting the server.

Its own module because the serve flags are the longest list of the command line (OVMS's names
and defaults, so existing command lines work unchanged); cli.py only assembles the parser.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

from graphrt.cli.classic import add_classic_model_arguments, model_options
from graphrt.cli.options import (
    add_task_arguments,
    load_user_code,
    parse_bool,
    task_flags_from,
)
from graphrt.cli.ovms_modes import add_ovms_mode_arguments, model_fetch, run_mode
from graphrt.cli.ovms_server_flags import (
    add_ovms_server_arguments,
    grpc_settings,
    openvino_settings,
)
from graphrt.export.text_graphs import TASKS
from graphrt.own_packages import other_owners
from graphrt.server import StartupError, serve
from graphrt.serving.settings import ServerSettings

__all__ = ["add_serve_arguments", "run", "settings_from"]

logger = logging.getLogger("graphrt")


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """OVMS's flag names and defaults, so existing command lines work unchanged."""
    add_ovms_mode_arguments(serve)
    serve.add_argument("--rest_port", type=int, default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--port", type=int, default=0, help="KServe gRPC port (0 = off)")
    serve.add_argument(
        "--rest_bind_address",
        default="127.0.0.1",
        help="address to listen on; 127.0.0.1 by default (OVMS uses 0.0.0.0): pass 0.0.0.0 to "
        "accept connections from other machines",
    )
    serve.add_argument(
        "--grpc_bind_address", default="127.0.0.1", help="KServe gRPC listen address"
    )
    serve.add_argument("--config_path", help="OVMS config.json with mediapipe_config_list")
    serve.add_argument(
        "--model_path",
        help="model directory (with or without graph.pbtxt), .gguf, or a classic model: a folder "
        "of version folders, or the model file itself (.xml, .onnx, .pdmodel, .pb, .tflite)",
    )
    serve.add_argument("--model_name", help="name clients use in the `model` field")
    serve.add_argument(
        "--task",
        choices=TASKS,
        help="graph to generate for --model_path (default: inferred from the model's files)",
    )
    add_task_arguments(serve, "serve")
    serve.add_argument(
        "--lora_modules",
        "--lora-modules",
        dest="lora_modules",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=PATH",
        help="LoRA adapters for the LLM of --model_path/--source_model, each served under its "
        "name (vLLM's flag): name=path[,name=path] or a JSON object {name, path, alpha}; path is "
        "a PEFT directory or a .safetensors file",
    )
    serve.add_argument(
        "--file_system_poll_wait_seconds",
        type=float,
        default=1.0,
        help="config.json polling interval; 0 turns reload polling off",
    )
    serve.add_argument(
        "--shutdown_timeout",
        type=float,
        default=30.0,
        help="seconds in-flight requests get to finish on SIGTERM",
    )
    serve.add_argument(
        "--max_request_size",
        type=int,
        default=32 * 1024 * 1024,
        help="largest request body in bytes (larger ones get 413)",
    )
    serve.add_argument(
        "--api_key_file", help="file whose first line is the API key (else $API_KEY)"
    )
    serve.add_argument(
        "--metrics_enable", action="store_true", help="serve GET /metrics (Prometheus)"
    )
    serve.add_argument(
        "--metrics_list",
        default="",
        help="comma-separated OVMS metric families to show (default: OVMS's defaults, all but "
        "ovms_infer_req_queue_size and ovms_infer_req_active)",
    )
    serve.add_argument("--allowed_origins", default="*", help="CORS: allowed origins")
    serve.add_argument("--allowed_methods", default="*", help="CORS: allowed methods")
    serve.add_argument("--allowed_headers", default="*", help="CORS: allowed headers")
    serve.add_argument(
        "--allow_credentials", type=parse_bool, default=False, help="CORS: allow credentials"
    )
    serve.add_argument(
        "--allowed_local_media_path", help="folder request images may be read from (default: none)"
    )
    serve.add_argument(
        "--allowed_media_domains", help="comma-separated hosts image URLs may use; 'all': any"
    )
    serve.add_argument(
        "--media_download_timeout",
        type=float,
        default=10.0,
        help="seconds an image URL download may take",
    )
    add_classic_model_arguments(serve)
    add_ovms_server_arguments(serve)
    serve.add_argument(
        "--max_engine_restarts",
        type=int,
        default=5,
        help="restarts of a servable's engine process allowed within --engine_restart_window; "
        "past that it stays down (0 = never restart)",
    )
    serve.add_argument(
        "--engine_restart_window",
        type=float,
        default=300.0,
        help="seconds over which --max_engine_restarts counts",
    )
    serve.add_argument(
        "--max_queued_requests",
        type=int,
        default=1024,
        help="requests that may wait for a servable's engine beyond its batch; more get 503 "
        "(a graph may set its own with '# GRAPHRT_MAX_QUEUED_REQUESTS: N')",
    )
    serve.add_argument(
        "--max_audio_seconds",
        type=float,
        default=3600.0,
        help="longest audio file speech-to-text graphs take, in seconds (longer: 400)",
    )
    serve.add_argument(
        "--verbose_response",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="LLM answers carry `__verbose`: the prompt after the chat template and the raw "
        "output, special tokens kept (OVMS's debugging aid)",
    )
    serve.add_argument("--rest_workers", type=int, help="accepted for OVMS compatibility; unused")
    serve.add_argument(
        "--log_level",
        choices=["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"],
        default=argparse.SUPPRESS,
        help="log level (also accepted before the subcommand; default INFO)",
    )
    serve.add_argument(
        "--graph_stats",
        type=parse_bool,
        default=True,
        help="gather live per-node figures for the /graphs page (default true)",
    )
    serve.add_argument(
        "--trace_dir",
        help="profile every graph and write Chrome trace-event files (Perfetto) into DIR",
    )
    serve.add_argument(
        "--tracing",
        type=parse_bool,
        default=False,
        help="send OpenTelemetry traces (needs graphrt[tracing]; the exporter is configured by "
        "the standard OTEL_* environment variables, OTLP by default)",
    )


def settings_from(args: argparse.Namespace) -> ServerSettings:
    api_key = os.environ.get("API_KEY") or None
    if args.api_key_file:
        with open(args.api_key_file, encoding="utf-8") as file:
            api_key = file.readline().strip()
        if not api_key:
            raise StartupError(f"--api_key_file {args.api_key_file}: the first line is empty")
    for flag in ("max_engine_restarts", "max_queued_requests"):
        if getattr(args, flag) < 0:
            raise StartupError(f"--{flag} must be 0 or more")
    if args.max_audio_seconds <= 0:
        raise StartupError("--max_audio_seconds must be a positive number of seconds")
    if args.engine_restart_window <= 0:
        raise StartupError("--engine_restart_window must be a positive number of seconds")
    return ServerSettings(
        rest_port=args.rest_port,
        port=args.port,
        rest_bind_address=args.rest_bind_address,
        grpc_bind_address=args.grpc_bind_address,
        config_path=args.config_path,
        model_path=args.model_path,
        model_name=args.model_name,
        task=args.task,
        log_level=args.log_level,
        file_system_poll_wait_seconds=args.file_system_poll_wait_seconds,
        shutdown_timeout=args.shutdown_timeout,
        max_request_size=args.max_request_size,
        api_key=api_key,
        metrics_enable=args.metrics_enable,
        metrics_list=[m for m in args.metrics_list.split(",") if m],
        allowed_origins=args.allowed_origins,
        allowed_methods=args.allowed_methods,
        allowed_headers=args.allowed_headers,
        allow_credentials=args.allow_credentials,
        allowed_local_media_path=args.allowed_local_media_path,
        media_download_timeout=args.media_download_timeout,
        allowed_media_domains=args.allowed_media_domains.split(",")
        if args.allowed_media_domains
        else None,
        graph_stats=args.graph_stats,
        trace_dir=args.trace_dir,
        tracing=args.tracing,
        max_engine_restarts=args.max_engine_restarts,
        engine_restart_window=args.engine_restart_window,
        max_queued_requests=args.max_queued_requests,
        max_audio_seconds=args.max_audio_seconds,
        subgraph_paths=tuple(args.subgraph_path),
        verbose_response=args.verbose_response,
        task_flags=task_flags_from(args),
        lora_modules=tuple(args.lora_modules),
        model_options=model_options(args),
        grpc=grpc_settings(args),
        openvino=openvino_settings(args),
    )


def warn_about_shared_names() -> None:
    for name, others in other_owners().items():
        logger.warning(
            "the distribution(s) %s also install a top-level '%s' package: theirs and graphrt's "
            "share one directory and may overwrite each other's files; install graphrt in its "
            "own virtual environment",
            ", ".join(others),
            name,
        )


def run(args: argparse.Namespace) -> int:
    """Serve until stopped; 1 when the server cannot start."""
    warn_about_shared_names()
    try:
        load_user_code(args.python_path, args.imports)
        settings = settings_from(args)
        status = run_mode(args, settings)
        if status is not None:
            return status
        return asyncio.run(serve(settings, model_fetch(args, settings)))
    except (StartupError, OSError) as error:
        logger.error("%s", error)
        return 1
