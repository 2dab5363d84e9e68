"""What the graph writers share: pbtxt string literals, and reading a model directory's JSON.

text_graphs.py (text generation, embeddings, rerank) and image_audio_graphs.py (image generation and
audio) write OVMS's graphs and recognise a model's task from its files the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from google.protobuf import text_encoding


def quote(text: str) -> str:
    """A protobuf text-format string literal (escapes quotes, backslashes, newlines)."""
    return '"' + text_encoding.CEscape(text.encode(), as_utf8=True) + '"'


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def architectures(path: Path) -> tuple[list[str], dict[str, Any]]:
    """The `architectures` a model directory's config.json names, and that config ({} without
    one)."""
    config = read_json(path / "config.json")
    if not isinstance(config, dict):
        return [], {}
    names = config.get("architectures")
    return [a for a in names if isinstance(a, str)] if isinstance(names, list) else [], config
