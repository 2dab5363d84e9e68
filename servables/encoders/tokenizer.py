"""openvino-genai's tokenizer for encoder models, returning one id array per text.

`Tokenizer.encode` pads a list of texts to one rectangle; encoder servables need each text's own
ids (to count tokens, refuse or cut long inputs, split documents into chunks and batch rows of
different requests), so the padding is taken off again with the attention mask.

openvino_tokenizers cannot build that rectangle when every text of a batch of two or more comes
out empty (a shape error at inference: "Input shape dimension equal 0 cannot be broadcasted");
such batches are encoded one text at a time, which it handles.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from servables.encoders.model import IdArray

# Texts per encode() call: bounds the padded rectangle one call builds.
ENCODE_CHUNK = 256


class EncoderTokenizer:
    """See the module docstring."""

    def __init__(self, models_path: Path, paired: bool = False) -> None:
        genai: Any = importlib.import_module("openvino_genai")
        options = {"add_second_input": True} if paired else {}
        self._tokenizer: Any = genai.Tokenizer(str(models_path), **options)
        self.supports_pairs = paired and bool(self._tokenizer.supports_paired_input())

    @property
    def raw(self) -> Any:
        """The openvino_genai.Tokenizer (for vocabulary and special-token queries)."""
        return self._tokenizer

    def encode(
        self,
        texts: Sequence[str],
        *,
        add_special_tokens: bool = True,
        max_length: int | None = None,
    ) -> list[IdArray]:
        """One id array per text; `max_length` cuts longer texts (truncation), else none is cut."""
        rows: list[IdArray] = []
        for start in range(0, len(texts), ENCODE_CHUNK):
            chunk = list(texts[start : start + ENCODE_CHUNK])
            options: dict[str, Any] = {"add_special_tokens": add_special_tokens}
            if max_length is not None:
                options.update(max_length=max_length, truncation=True)
            try:
                encoded = [self._tokenizer.encode(chunk, **options)]
            except RuntimeError:
                if len(chunk) == 1:
                    raise
                encoded = [self._tokenizer.encode([text], **options) for text in chunk]
            for part in encoded:
                rows.extend(_unpad(part.input_ids.data, part.attention_mask.data))
        return rows

    def encode_pairs(self, first: Sequence[str], second: Sequence[str]) -> list[IdArray]:
        """Pairs with the tokenizer's own pair template (special tokens included)."""
        encoded = self._tokenizer.encode(list(first), list(second), add_special_tokens=True)
        return _unpad(encoded.input_ids.data, encoded.attention_mask.data)

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._tokenizer.decode(list(ids), skip_special_tokens=True)
        return text


def _unpad(ids: Any, mask: Any) -> list[IdArray]:
    ids = np.asarray(ids, dtype=np.int64)
    keep = np.asarray(mask) != 0
    return [row[row_keep].copy() for row, row_keep in zip(ids, keep, strict=True)]
