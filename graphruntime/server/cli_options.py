"""Command-line flags more than one `graphrt` subcommand takes, and what they set up.

The encoder flags (`graphrt serve` and `graphrt export`), the user-code flags (`serve`,
`graph validate`, `graph profile`) and the true/false flag type are shared by several
subcommands, so they live here rather than in any one subcommand's module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from graphruntime.server.server import StartupError

__all__ = [
    "POOLING_CHOICES",
    "add_encoder_arguments",
    "add_user_code_arguments",
    "load_user_code",
    "parse_bool",
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


def load_user_code(paths: Sequence[str], modules: Sequence[str]) -> None:
    """Make the user's calculators importable, and registered, before any graph loads."""
    for path in reversed(paths):
        sys.path.insert(0, str(Path(path).resolve()))
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as error:  # whatever the user's module raised while loading
            raise StartupError(f"--import {module}: {type(error).__name__}: {error}") from error


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("true", "1", "yes", "on"):
        return True
    if lowered in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


POOLING_CHOICES = ["CLS", "LAST", "MEAN"]


def add_encoder_arguments(parser: argparse.ArgumentParser) -> None:
    """OVMS's embeddings and rerank task flags (docs/parameters.md)."""
    parser.add_argument(
        "--num_streams", type=int, default=1, help="embeddings/rerank: parallel streams"
    )
    parser.add_argument(
        "--pooling",
        choices=POOLING_CHOICES,
        help="embeddings: pooling (default: the model's 1_Pooling/config.json, else CLS)",
    )
    parser.add_argument(
        "--normalize",
        type=parse_bool,
        nargs="?",
        const=True,
        default=True,
        help="embeddings: L2-normalise (default true)",
    )
    parser.add_argument(
        "--truncate",
        type=parse_bool,
        nargs="?",
        const=True,
        default=False,
        help="embeddings: cut inputs longer than the context instead of refusing them",
    )
    parser.add_argument(
        "--max_allowed_chunks",
        type=int,
        help="rerank: most (query, document chunk) pairs per request (default 10000)",
    )
