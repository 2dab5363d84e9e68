"""Hugging Face JSON files of a model directory, and what config.json says of the context length.

Shared by the LLM's model files (servables.llm.model_files), encoder model directories
(servables.encoders.model_dir) and the image generation servable: the context length is the
first positive integer among OVMS's field names.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from servables.io.request_fields import is_integer

logger = logging.getLogger(__name__)

MAX_LENGTH_FIELDS = (
    "max_position_embeddings",
    "n_positions",
    "seq_len",
    "seq_length",
    "n_ctx",
    "sliding_window",
)


def max_model_length(config: Mapping[str, Any]) -> int | None:
    """The context length from a parsed config.json, with OVMS's field list and order."""
    for field in MAX_LENGTH_FIELDS:
        value = config.get(field)
        if is_integer(value) and value > 0:
            return value
    return None


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`, or {} when it is missing or unreadable (logged)."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        logger.warning("cannot read %s: %s", path, error)
        return {}
    return data if isinstance(data, dict) else {}
