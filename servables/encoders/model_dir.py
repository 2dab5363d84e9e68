"""What an encoder model directory says about itself, read the way OVMS reads it.

An embeddings or rerank directory is what `optimum-cli export openvino` (or OVMS's
export_model.py) writes: `openvino_model.xml/.bin`, `openvino_tokenizer.xml/.bin`, the Hugging
Face `config.json` and `tokenizer_config.json`, and for sentence-transformers models
`1_Pooling/config.json`. The context length comes from config.json with OVMS's field list; the
pooling mode a sentence-transformers model was trained with from its pooling config, so a graph
that does not name one still pools as the model expects.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from servables.hf_config import max_model_length as max_model_length  # for its users
from servables.hf_config import read_json as read_json  # for its users

logger = logging.getLogger(__name__)

MODEL_FILE = "openvino_model.xml"
TOKENIZER_FILE = "openvino_tokenizer.xml"
POOLING_CONFIG = Path("1_Pooling") / "config.json"
# sentence-transformers pooling flags → OVMS's pooling names (the modes OVMS supports).
POOLING_FLAGS = {
    "pooling_mode_cls_token": "CLS",
    "pooling_mode_mean_tokens": "MEAN",
    "pooling_mode_lasttoken": "LAST",
}
UNSUPPORTED_POOLING_FLAGS = (
    "pooling_mode_max_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens",
)


def model_config(path: Path) -> dict[str, Any]:
    return read_json(path / "config.json")


def detect_pooling(path: Path) -> str | None:
    """CLS, MEAN or LAST from a sentence-transformers pooling config; None if absent/unclear."""
    pooling_path = path / POOLING_CONFIG
    config = read_json(pooling_path)
    if not config:
        return None
    for flag in UNSUPPORTED_POOLING_FLAGS:
        if config.get(flag) is True:
            logger.warning(
                "%s asks for %s, which is not supported (only CLS, MEAN and LAST)",
                pooling_path,
                flag,
            )
            return None
    found = [mode for flag, mode in POOLING_FLAGS.items() if config.get(flag) is True]
    if len(found) != 1:
        logger.warning("%s names %d pooling modes; expected exactly one", pooling_path, len(found))
        return None
    return found[0]
