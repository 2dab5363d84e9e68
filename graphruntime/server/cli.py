"""`graphrt` command line: serve models, and validate or draw graph files.

This module is the only place that configures logging and reads process arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from graphruntime.config import load_graph_config
from graphruntime.drawing import FORMATS
from graphruntime.errors import GraphConfigError, GraphError, GraphValidationError
from graphruntime.layout import to_html
from graphruntime.server import profile_command
from graphruntime.server.export import ExportError, ExportRequest, export_text_generation
from graphruntime.server.graph_export import TextGenerationSettings
from graphruntime.server.own_packages import other_owners
from graphruntime.server.server import StartupError, serve
from graphruntime.server.settings import ServerSettings
from graphruntime.validation import ValidatedGraph

logger = logging.getLogger("graphrt")


def validate_files(paths: Sequence[str], parse_only: bool) -> int:
    """Print one `FILE:LINE: message` per problem; 0 when every file is fine, else 1."""
    failed = False
    for path in paths:
        try:
            config = load_graph_config(path)
            if not parse_only:
                graph = ValidatedGraph.from_config(config)
                for warning in graph.warnings:
                    print(
                        f"{warning.location or path}: warning: {warning.message}", file=sys.stderr
                    )
        except GraphValidationError as error:
            failed = True
            for issue in error.issues:
                print(f"{issue.location or path}: {issue.message}")
        except GraphConfigError as error:
            failed = True
            print(f"{error.location or path}: {error.message}")
        except GraphError as error:
            failed = True
            print(f"{path}: {error.message}")
    return 1 if failed else 0


def show_file(path: str, output_format: str, output: str | None) -> int:
    try:
        config = load_graph_config(path)
        rendered = SHOW_FORMATS[output_format](config)
    except GraphConfigError as error:
        print(f"{error.location or path}: {error.message}", file=sys.stderr)
        return 1
    except GraphError as error:
        print(f"{path}: {error.message}", file=sys.stderr)
        return 1
    if output:
        with open(output, "w", encoding="utf-8") as file:
            file.write(rendered)
    else:
        sys.stdout.write(rendered)
    return 0


# "html": the picture the /graphs page shows, drawn in Python (no Graphviz needed).
SHOW_FORMATS = {**FORMATS, "html": to_html}


def add_user_code_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--python_path",
        action="append",
        default=[],
        metavar="DIR",
        help="directory to import user calculators from (repeatable)",
    )
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="module to import at startup, e.g. one that registers calculators (repeatable)",
    )


def load_user_code(paths: Sequence[str], modules: Sequence[str]) -> None:
    """Make the user's calculators importable, and registered, before any graph loads."""
    for path in reversed(paths):
        sys.path.insert(0, str(Path(path).resolve()))
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # whatever the user's module raised while loading
            raise StartupError(f"--import {module}: {type(error).__name__}: {error}") from error


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """OVMS's flag names and defaults, so existing command lines work unchanged."""
    serve.add_argument("--rest_port", type=int, default=8000, help="HTTP port (default 8000)")
    serve.add_argument("--port", type=int, default=0, help="KServe gRPC port (0 = off)")
    serve.add_argument(
        "--rest_bind_address",
        default="127.0.0.1",
        help="address to listen on; 127.0.0.1 by default (OVMS uses 0.0.0.0): pass 0.0.0.0 to "
        "accept connections from other machines",
    )
    serve.add_argument("--grpc_bind_address", default="127.0.0.1")
    serve.add_argument("--config_path", help="OVMS config.json with mediapipe_config_list")
    serve.add_argument(
        "--model_path", help="model directory (with or without graph.pbtxt) or .gguf"
    )
    serve.add_argument("--model_name", help="name clients use in the `model` field")
    serve.add_argument(
        "--task", choices=["text_generation"], help="graph to generate for --model_path"
    )
    serve.add_argument("--target_device", default="CPU")
    serve.add_argument(
        "--cache_size", type=int, default=0, help="KV cache in GB; 0 = grow on demand"
    )
    serve.add_argument("--max_num_seqs", type=int, default=256)
    serve.add_argument("--max_num_batched_tokens", type=int)
    serve.add_argument("--enable_prefix_caching", type=_bool, default=True)
    serve.add_argument("--dynamic_split_fuse", type=_bool, default=True)
    serve.add_argument("--pipeline_type", choices=["LM", "LM_CB", "VLM", "VLM_CB", "AUTO"])
    serve.add_argument("--kv_cache_precision", choices=["u8", "u4", "f16", "bf16", "f32"])
    serve.add_argument("--plugin_config", help="JSON object of OpenVINO properties")
    serve.add_argument("--draft_source_model", help="draft model path for speculative decoding")
    serve.add_argument(
        "--max_tokens_limit", type=int, help="upper limit for a request's max_tokens"
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
    serve.add_argument("--metrics_enable", action="store_true")
    serve.add_argument("--metrics_list", default="")
    serve.add_argument("--allowed_origins", default="*")
    serve.add_argument("--allowed_methods", default="*")
    serve.add_argument("--allowed_headers", default="*")
    serve.add_argument("--allow_credentials", type=_bool, default=False)
    serve.add_argument("--allowed_local_media_path")
    serve.add_argument(
        "--allowed_media_domains", help="comma-separated hosts image URLs may use; 'all': any"
    )
    serve.add_argument(
        "--media_download_timeout",
        type=float,
        default=10.0,
        help="seconds an image URL download may take",
    )
    serve.add_argument("--rest_workers", type=int, help="accepted for OVMS compatibility; unused")
    serve.add_argument(
        "--log_level",
        choices=["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"],
        default=argparse.SUPPRESS,
    )
    serve.add_argument(
        "--graph_stats",
        type=_bool,
        default=True,
        help="gather live per-node figures for the /graphs page (default true)",
    )
    serve.add_argument(
        "--trace_dir",
        help="profile every graph and write Chrome trace-event files (Perfetto) into DIR",
    )
    serve.add_argument(
        "--tracing",
        type=_bool,
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
        target_device=args.target_device,
        cache_size=args.cache_size,
        max_num_seqs=args.max_num_seqs,
        enable_prefix_caching=args.enable_prefix_caching,
        dynamic_split_fuse=args.dynamic_split_fuse,
        max_num_batched_tokens=args.max_num_batched_tokens,
        pipeline_type=args.pipeline_type,
        kv_cache_precision=args.kv_cache_precision,
        plugin_config=args.plugin_config,
        draft_source_model=args.draft_source_model,
        max_tokens_limit=args.max_tokens_limit,
        graph_stats=args.graph_stats,
        trace_dir=args.trace_dir,
        tracing=args.tracing,
    )


def run_export(args: argparse.Namespace) -> int:
    plugin_config = json.loads(args.plugin_config) if args.plugin_config else {}
    request = ExportRequest(
        source_model=args.source_model,
        model_repository_path=Path(args.model_repository_path),
        config_file_path=Path(args.config_file_path) if args.config_file_path else None,
        model_name=args.model_name,
        weight_format=args.weight_format,
        overwrite_models=args.overwrite_models,
        graph=TextGenerationSettings(
            models_path="",
            target_device=args.target_device,
            max_num_seqs=args.max_num_seqs,
            cache_size=args.cache_size,
            enable_prefix_caching=args.enable_prefix_caching,
            dynamic_split_fuse=not args.disable_dynamic_split_fuse,
            max_num_batched_tokens=args.max_num_batched_tokens,
            pipeline_type=args.pipeline_type,
            kv_cache_precision=args.kv_cache_precision,
            plugin_config=plugin_config,
        ),
    )
    try:
        export_text_generation(request)
    except ExportError as error:
        logger.error("%s", error)
        return 1
    return 0


def add_export_arguments(export: argparse.ArgumentParser) -> None:
    """export_model.py's text_generation flags."""
    export.add_argument("task", choices=["text_generation"])
    export.add_argument(
        "--source_model",
        required=True,
        help=".gguf file, OpenVINO IR directory, or Hugging Face model",
    )
    export.add_argument("--model_repository_path", default="models")
    export.add_argument("--config_file_path", help="config.json to add the model to")
    export.add_argument("--model_name", help="default: the source file or directory name")
    export.add_argument(
        "--weight-format",
        dest="weight_format",
        default="int8",
        choices=["fp32", "fp16", "int8", "int4"],
        help="for Hugging Face sources",
    )
    export.add_argument("--target_device", default="CPU")
    export.add_argument("--max_num_seqs", type=int, default=256)
    export.add_argument("--cache_size", type=int, default=0)
    export.add_argument("--enable_prefix_caching", type=_bool, default=True)
    export.add_argument("--disable_dynamic_split_fuse", action="store_true")
    export.add_argument("--max_num_batched_tokens", type=int)
    export.add_argument("--pipeline_type", choices=["LM", "LM_CB", "VLM", "VLM_CB", "AUTO"])
    export.add_argument("--kv_cache_precision", choices=["u8", "u4", "f16", "bf16", "f32"])
    export.add_argument("--plugin_config", help="JSON object of OpenVINO properties")
    export.add_argument("--overwrite_models", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphrt",
        description="MediaPipe-style graph runtime and OpenVINO model server.",
    )
    parser.add_argument(
        "--log_level",
        default="INFO",
        choices=["TRACE", "DEBUG", "INFO", "WARNING", "ERROR"],
        help="also accepted after the subcommand",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser(
        "serve", help="serve models over the OpenAI and KServe APIs (OVMS flags)"
    )
    add_serve_arguments(serve)
    add_user_code_arguments(serve)
    export = commands.add_parser(
        "export", help="write a model directory, graph.pbtxt and config entry (export_model.py)"
    )
    add_export_arguments(export)

    graph = commands.add_parser("graph", help="check or draw graph.pbtxt files")
    graph_commands = graph.add_subparsers(dest="graph_command", required=True)
    validate = graph_commands.add_parser(
        "validate", help="check graph files; prints FILE:LINE: message per problem"
    )
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.add_argument(
        "--parse-only", action="store_true", help="check only the text and schema"
    )
    add_user_code_arguments(validate)
    show = graph_commands.add_parser("show", help="draw a graph's nodes, streams and back edges")
    show.add_argument("file", metavar="FILE")
    show.add_argument("--format", choices=sorted(SHOW_FORMATS), default="text")
    show.add_argument("-o", "--output", help="write to this file instead of stdout")
    profile = graph_commands.add_parser(
        "profile", help="run a graph on sample input and print per-node timings"
    )
    profile.add_argument("file", metavar="GRAPH")
    profile.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="STREAM=VALUE",
        help="one packet for a graph input stream (repeatable; JSON or plain text)",
    )
    profile.add_argument(
        "--side_packet",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an input side packet (repeatable; JSON or plain text)",
    )
    profile.add_argument(
        "--repeat", type=int, default=1, help="send the inputs this many times (default 1)"
    )
    profile.add_argument("--trace_dir", help="also write a Chrome trace-event file here")
    add_user_code_arguments(profile)
    return parser


def warn_about_shared_names() -> None:
    for name, others in other_owners().items():
        logger.warning(
            "the distribution(s) %s also install a top-level '%s' package: theirs and graphrt's "
            "share one directory and may overwrite each other's files; install graphrt in its "
            "own virtual environment",
            ", ".join(others),
            name,
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = "DEBUG" if args.log_level == "TRACE" else args.log_level
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Pillow logs every PNG chunk at DEBUG; request images would drown the server's own lines.
    logging.getLogger("PIL").setLevel(max(logging.INFO, logging.getLogger().level))
    if args.command == "serve":
        warn_about_shared_names()
        try:
            load_user_code(args.python_path, args.imports)
            return asyncio.run(serve(settings_from(args)))
        except (StartupError, OSError) as error:
            logger.error("%s", error)
            return 1
    if args.command == "export":
        return run_export(args)
    if args.command == "graph":
        if args.graph_command == "validate":
            try:
                load_user_code(args.python_path, args.imports)
            except StartupError as error:
                print(error, file=sys.stderr)
                return 1
            return validate_files(args.files, args.parse_only)
        if args.graph_command == "profile":
            try:
                load_user_code(args.python_path, args.imports)
            except StartupError as error:
                print(error, file=sys.stderr)
                return 1
            return profile_command.run(
                args.file, args.input, args.side_packet, max(1, args.repeat), args.trace_dir
            )
        return show_file(args.file, args.format, args.output)
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
