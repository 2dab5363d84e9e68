"""How a cross-encoder wants a (query, document) pair laid out, in token ids.

Long documents are split into chunks of tokens (as OVMS does), so pairs are assembled from token
ids rather than text: query ids, chunk ids and the special tokens around them. The layout is the
tokenizer's own pair template ([CLS] q [SEP] d [SEP] for BERT, <s> q </s></s> d </s> for
RoBERTa/XLM-R), found once at load by encoding a probe pair with and without special tokens and
reading off what surrounds the two texts; the second text's segment gets token type 1 when the
model takes token types (as Hugging Face's BERT tokenizers do).

Directories exported the OVMS way have a tokenizer without special tokens (`add_special_tokens
=False`); for those the layout is OVMS's: BOS query EOS SEP document EOS, with the ids from
config.json and tokenizer_config.json.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from servables.encoders.model import EncodedInput, IdArray
from servables.encoders.model_dir import model_config, read_json
from servables.encoders.tokenizer import EncoderTokenizer
from servables.io.request_fields import is_integer

logger = logging.getLogger(__name__)

PROBE_FIRST = "query"
PROBE_SECOND = "document text"


@dataclass(frozen=True)
class PairTemplate:
    prefix: tuple[int, ...]
    middle: tuple[int, ...]
    suffix: tuple[int, ...]
    typed: bool  # the document segment gets token type 1
    source: str  # "tokenizer" or "ovms"

    @property
    def special_tokens(self) -> int:
        return len(self.prefix) + len(self.middle) + len(self.suffix)

    def build(self, query: IdArray, document: IdArray) -> EncodedInput:
        ids = np.concatenate(
            [
                np.asarray(self.prefix, dtype=np.int64),
                query,
                np.asarray(self.middle, dtype=np.int64),
                document,
                np.asarray(self.suffix, dtype=np.int64),
            ]
        )
        if not self.typed:
            return EncodedInput(ids)
        first = len(self.prefix) + len(query) + len(self.middle)
        types = np.zeros(len(ids), dtype=np.int64)
        types[first:] = 1
        return EncodedInput(ids, types)


def _find(haystack: Sequence[int], needle: Sequence[int], start: int = 0) -> int:
    for index in range(start, len(haystack) - len(needle) + 1):
        if list(haystack[index : index + len(needle)]) == list(needle):
            return index
    return -1


def probe_template(tokenizer: EncoderTokenizer, typed: bool) -> PairTemplate | None:
    """The tokenizer's pair template, or None when it adds no special tokens to pairs."""
    if not tokenizer.supports_pairs:
        return None
    first, second = tokenizer.encode([PROBE_FIRST, PROBE_SECOND], add_special_tokens=False)
    (pair,) = tokenizer.encode_pairs([PROBE_FIRST], [PROBE_SECOND])
    pair_list = pair.tolist()
    at_first = _find(pair_list, first.tolist())
    at_second = _find(pair_list, second.tolist(), at_first + len(first)) if at_first >= 0 else -1
    if at_first < 0 or at_second < 0:
        logger.warning("cannot read the tokenizer's pair template from %s", pair_list)
        return None
    template = PairTemplate(
        prefix=tuple(pair_list[:at_first]),
        middle=tuple(pair_list[at_first + len(first) : at_second]),
        suffix=tuple(pair_list[at_second + len(second) :]),
        typed=typed,
        source="tokenizer",
    )
    return template if template.special_tokens else None


def _token_id(
    name: str, config: dict[str, Any], tokenizer_config: dict[str, Any], tokenizer: EncoderTokenizer
) -> int | None:
    """config.json's `<name>_token_id`, else tokenizer_config.json's token encoded (as OVMS)."""
    value = config.get(f"{name}_token_id")
    if is_integer(value) and value != 0:
        return value
    token = tokenizer_config.get(f"{name}_token")
    if isinstance(token, dict):
        token = token.get("content")
    if isinstance(token, str):
        (ids,) = tokenizer.encode([token], add_special_tokens=False)
        if len(ids) == 1:
            return int(ids[0])
    return None


def ovms_template(models_path: Path, tokenizer: EncoderTokenizer) -> PairTemplate:
    """OVMS's manual layout (rerank_calculator_ov.cc): BOS query EOS SEP document EOS."""
    config = model_config(models_path)
    tokenizer_config = read_json(models_path / "tokenizer_config.json")
    bos = _token_id("bos", config, tokenizer_config, tokenizer) or 0
    eos = _token_id("eos", config, tokenizer_config, tokenizer) or 0
    sep = _token_id("sep", config, tokenizer_config, tokenizer)
    return PairTemplate((bos,), (eos, sep if sep is not None else eos), (eos,), False, "ovms")
