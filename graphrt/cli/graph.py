"""`graphrt graph validate|show|expand|profile`: the graph subcommands' flags and the first three.

Checking and drawing graph files needs no server, so these commands live apart from `serve`;
`profile` runs a graph and has its own module (profile.py), dispatched from here.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from graphrt.cli import profile as profile_command
from graphrt.cli.options import (
    add_subgraph_path_argument,
    add_user_code_arguments,
    load_user_code,
)
from graphrt.server import StartupError
from graphruntime.config import load_graph_config
from graphruntime.config_print import config_to_text, mediapipe_order
from graphruntime.drawing import FORMATS
from graphruntime.errors import (
    GraphConfigError,
    GraphError,
    GraphValidationError,
    SourceLocation,
)
from graphruntime.layout import to_html
from graphruntime.subgraph_expansion import expand_subgraphs
from graphruntime.subgraphs import SubgraphLibrary
from graphruntime.validation import ValidatedGraph

__all__ = [
    "SHOW_FORMATS",
    "add_graph_arguments",
    "expand_file",
    "run",
    "show_file",
    "validate_files",
]


def _at(location: SourceLocation | None, path: str, message: str) -> str:
    return location.describe(message) if location else f"{path}: {message}"


def validate_files(
    paths: Sequence[str], parse_only: bool, subgraph_paths: Sequence[str] = ()
) -> int:
    """Print one `FILE:LINE: message` per problem; 0 when every file is fine, else 1."""
    failed = False
    for path in paths:
        try:
            config = load_graph_config(path)
            if not parse_only:
                graph = ValidatedGraph.from_config(config, subgraph_paths=subgraph_paths)
                for warning in graph.warnings:
                    message = f"warning: {warning.message}"
                    print(_at(warning.location, path, message), file=sys.stderr)
        except GraphValidationError as error:
            failed = True
            for issue in error.issues:
                print(_at(issue.location, path, issue.message))
        except GraphConfigError as error:
            failed = True
            print(_at(error.location, path, error.message))
        except GraphError as error:
            failed = True
            print(f"{path}: {error.message}")
    return 1 if failed else 0


def expand_file(path: str, subgraph_paths: Sequence[str], output: str | None) -> int:
    """Print the graph with its subgraphs expanded, as MediaPipe orders and names it."""
    try:
        config = expand_subgraphs(load_graph_config(path), SubgraphLibrary(subgraph_paths))
        rendered = config_to_text(config, mediapipe_order(config.proto))
    except GraphConfigError as error:
        print(_at(error.location, path, error.message), file=sys.stderr)
        return 1
    except GraphError as error:
        print(f"{path}: {error.message}", file=sys.stderr)
        return 1
    return _write(rendered, output)


def _write(rendered: str, output: str | None) -> int:
    if output:
        with open(output, "w", encoding="utf-8") as file:
            file.write(rendered)
    else:
        sys.stdout.write(rendered)
    return 0


def show_file(
    path: str,
    output_format: str,
    output: str | None,
    subgraph_paths: Sequence[str] = (),
    collapsed: bool = False,
) -> int:
    """Draw the graph: its subgraphs expanded into groups, or `collapsed` to one node each."""
    try:
        config = load_graph_config(path)
        if not collapsed:
            config = expand_subgraphs(config, SubgraphLibrary(subgraph_paths))
        rendered = SHOW_FORMATS[output_format](config)
    except GraphConfigError as error:
        print(f"{error.location or path}: {error.message}", file=sys.stderr)
        return 1
    except GraphError as error:
        print(f"{path}: {error.message}", file=sys.stderr)
        return 1
    return _write(rendered, output)


# "html": the picture the /graphs page shows, drawn in Python (no Graphviz needed).
SHOW_FORMATS = {**FORMATS, "html": to_html}


def add_graph_arguments(graph: argparse.ArgumentParser) -> None:
    """The `graph` command's own subcommands: validate, show and profile."""
    graph_commands = graph.add_subparsers(dest="graph_command", required=True)
    validate = graph_commands.add_parser(
        "validate", help="check graph files; prints FILE:LINE: message per problem"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="graph.pbtxt files to check")
    validate.add_argument(
        "--parse-only", action="store_true", help="check only the text and schema"
    )
    add_user_code_arguments(validate)
    add_subgraph_path_argument(validate)
    show = graph_commands.add_parser("show", help="draw a graph's nodes, streams and back edges")
    show.add_argument("file", metavar="FILE", help="the graph.pbtxt file")
    show.add_argument(
        "--format",
        choices=sorted(SHOW_FORMATS),
        default="text",
        help="text, or a picture (svg needs Graphviz's dot)",
    )
    show.add_argument("-o", "--output", help="write to this file instead of stdout")
    show.add_argument(
        "--subgraphs",
        choices=["expanded", "collapsed"],
        default="expanded",
        help="draw each subgraph's nodes inside a group (default), or the subgraph as one node",
    )
    add_subgraph_path_argument(show)
    add_user_code_arguments(show)
    expand = graph_commands.add_parser(
        "expand",
        help="print the graph with its subgraphs expanded, in MediaPipe's order and names",
    )
    expand.add_argument("file", metavar="FILE", help="the graph.pbtxt file")
    expand.add_argument("-o", "--output", help="write to this file instead of stdout")
    add_subgraph_path_argument(expand)
    add_user_code_arguments(expand)
    profile = graph_commands.add_parser(
        "profile", help="run a graph on sample input and print per-node timings"
    )
    profile.add_argument("file", metavar="GRAPH", help="the graph.pbtxt file to run")
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
    add_subgraph_path_argument(profile)
    add_user_code_arguments(profile)


def run(args: argparse.Namespace) -> int:
    """Run the `graph` subcommand `args` name; its exit status."""
    try:
        load_user_code(args.python_path, args.imports)
    except StartupError as error:
        print(error, file=sys.stderr)
        return 1
    paths = args.subgraph_path
    if args.graph_command == "validate":
        return validate_files(args.files, args.parse_only, paths)
    if args.graph_command == "profile":
        return profile_command.run(
            args.file, args.input, args.side_packet, max(1, args.repeat), args.trace_dir, paths
        )
    if args.graph_command == "expand":
        return expand_file(args.file, paths, args.output)
    return show_file(args.file, args.format, args.output, paths, args.subgraphs == "collapsed")
