"""`graphrt` command line: serve models, export them, and validate or draw graph files.

This module is the only place that configures logging and reads process arguments. It assembles
the parser and dispatches; each subcommand family's flags and command live in their own module:
serve.py, export.py, graph.py (flags several share: options.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from graphrt.cli import export as export_command
from graphrt.cli import graph as graph_command
from graphrt.cli import serve as serve_command
from graphrt.cli.options import add_subgraph_path_argument, add_user_code_arguments
from graphrt.observability import request_ids
from servables.llm.engine.lifetime import LOG_PATH_ENVIRONMENT

__all__ = ["build_parser", "main"]


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
    serve_command.add_serve_arguments(serve)
    add_user_code_arguments(serve)
    add_subgraph_path_argument(serve)
    export = commands.add_parser(
        "export", help="write a model directory, graph.pbtxt and config entry (export_model.py)"
    )
    export_command.add_export_arguments(export)

    graph = commands.add_parser("graph", help="check or draw graph.pbtxt files")
    graph_command.add_graph_arguments(graph)
    return parser


COMMANDS = ("serve", "export", "graph")


def with_command(argv: Sequence[str]) -> list[str]:
    """OVMS's command lines have no subcommand (`ovms --source_model ... --rest_port 8000`):
    flags without one mean `serve`."""
    args = list(argv)
    position = 0
    while position < len(args) and args[position].startswith("-"):
        if args[position] in ("-h", "--help"):
            return args
        position += 2 if args[position] == "--log_level" else 1
    if args and (position >= len(args) or args[position] not in COMMANDS):
        return ["serve", *args]
    return args


def log_handlers(log_path: str | None) -> list[logging.Handler]:
    """The console, and OVMS's --log_path file (appended) when given, which the engine
    processes append to as well (they inherit its path)."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_path:
        handlers.append(logging.FileHandler(log_path, encoding="utf-8"))
        os.environ[LOG_PATH_ENVIRONMENT] = str(Path(log_path).resolve())
    return handlers


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(with_command(sys.argv[1:] if argv is None else argv))
    level = "DEBUG" if args.log_level == "TRACE" else args.log_level
    try:
        handlers = log_handlers(getattr(args, "log_path", None))
    except OSError as error:
        parser.error(f"--log_path: {error}")
    logging.basicConfig(level=level, format=request_ids.LOG_FORMAT, handlers=handlers)
    request_ids.install(logging.getLogger().handlers)
    # Pillow logs every PNG chunk at DEBUG; request images would drown the server's own lines.
    logging.getLogger("PIL").setLevel(max(logging.INFO, logging.getLogger().level))
    if args.command == "serve":
        return serve_command.run(args)
    if args.command == "export":
        return export_command.run_export(args)
    if args.command == "graph":
        return graph_command.run(args)
    parser.error(f"unknown command {args.command}")


if __name__ == "__main__":
    sys.exit(main())
