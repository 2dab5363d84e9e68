"""Command-line flags more than one `graphrt` subcommand takes, and what they set up.

The task flags (`graphrt serve` and `graphrt export`, declared in graphrt/export/task_flags.py),
the user-code flags (`serve`, `graph validate`, `graph profile`) and the true/false flag type are
shared by several subcommands, so they live here rather than in any one subcommand's module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any, Literal

from graphrt.export.task_flags import Flag, TaskFlags, parse_bool
from graphrt.server import StartupError

__all__ = [
    "add_subgraph_path_argument",
    "add_task_arguments",
    "add_user_code_arguments",
    "load_user_code",
    "parse_bool",
    "task_flags_from",
]


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


def add_subgraph_path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--subgraph_path",
        action="append",
        default=[],
        metavar="DIR",
        help="directory of subgraph .pbtxt files (with `type:`), searched after the graph's own "
        "directory (repeatable)",
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


def add_task_arguments(
    parser: argparse.ArgumentParser, command: Literal["serve", "export"]
) -> None:
    """OVMS's task flags that `command` ("serve" or "export") takes, as TaskFlags declares them;
    the image and audio tasks' in a group of their own."""
    media = parser.add_argument_group("image generation and audio tasks")
    for each in fields(TaskFlags):
        flag: Flag = each.metadata["flag"]
        if command == "export" and not flag.export:
            continue
        how: dict[str, Any] = {"default": each.default, "help": flag.help}
        if flag.parse is not None:
            how["type"] = flag.parse
        if flag.choices is not None:
            how["choices"] = flag.choices
        if flag.optional_value:
            how.update(nargs="?", const=True)
        (media if flag.media else parser).add_argument(f"--{each.name}", **how)


def task_flags_from(args: argparse.Namespace) -> TaskFlags:
    """The task flags parsed (a flag the command does not take keeps its default)."""
    names = [each.name for each in fields(TaskFlags) if hasattr(args, each.name)]
    return TaskFlags(**{name: getattr(args, name) for name in names})
