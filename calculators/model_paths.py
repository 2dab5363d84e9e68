"""Paths in node options: relative to the graph's directory, as in OVMS.

Shared by every factory that turns a node's options into a servable (embeddings, rerank, image
generation, speech), so a wrong `models_path` fails the graph's load with the same message,
naming the file the model directory lacks, never with the pipeline's own error.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from servables.errors import ServableLoadError


def graph_relative(path: str, graph_dir: Path) -> Path:
    """`path` as OVMS reads it: relative to the graph's directory unless absolute."""
    resolved = Path(path).expanduser()
    return (resolved if resolved.is_absolute() else graph_dir / resolved).resolve()


def resolve_model_dir(models_path: str, graph_dir: Path, what: str, markers: Sequence[str]) -> Path:
    """The node's model directory, which must exist and hold every file of `markers`."""
    if not models_path:
        raise ServableLoadError(f"{what} node models_path is empty", param="models_path")
    path = graph_relative(models_path, graph_dir)
    if not path.is_dir():
        raise ServableLoadError(
            f"{what} node models_path: {path} is not a directory", param="models_path"
        )
    for name in markers:
        if not (path / name).is_file():
            raise ServableLoadError(
                f"{what} node models_path: {path} has no {name} (export the model with "
                "`graphrt export` or OVMS's export_model.py)",
                param="models_path",
            )
    return path
