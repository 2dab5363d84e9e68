"""What a Hugging Face config.json says about a model's context length, read as OVMS reads it.

Shared by the LLM's model files (servables.llm.model_files) and encoder model directories
(servables.encoders.model_dir): both take the first positive integer among OVMS's field names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
