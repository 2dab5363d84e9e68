"""The embeddings servable: texts or token ids in, one vector each, batched across requests.

It lives in the server process: tokenization is short, and the inference (openvino, GIL
released) runs on worker threads fed by a DynamicBatcher, so concurrent requests share
inferences. An input longer than the model's context is refused (400) unless the graph says
`truncate`, as in OVMS; the context is config.json's (OVMS's fields), 1024 when it has none.
Requests beyond what the batches run at once queue, up to the server's bound (`admission`, as
for LLMs); past it they are refused with ServableBusy (503, Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from servables.embeddings.pooling import add_pooling
from servables.encoders.batcher import DynamicBatcher
from servables.encoders.model import EncodedInput, EncoderModel, FloatArray
from servables.encoders.model_dir import detect_pooling, max_model_length
from servables.encoders.servable import EncoderConfig, EncoderServable
from servables.encoders.tokenizer import EncoderTokenizer
from servables.errors import InvalidRequest, ServableNotReady

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT = 1024  # OVMS's, for models whose config.json names none


@dataclass
class EmbeddingsConfig(EncoderConfig):
    pooling: str | None = None  # None: the model's 1_Pooling/config.json, else CLS
    normalize: bool = True
    truncate: bool = False
    max_inputs: int = 2048


@dataclass(frozen=True)
class Embeddings:
    vectors: npt.NDArray[np.float32]  # [inputs, dimensions]
    prompt_tokens: int


class EmbeddingsServable(EncoderServable[EmbeddingsConfig, FloatArray]):
    """See the module docstring; the lifecycle is EncoderServable's."""

    kind = "embeddings"
    special_tokens_by_default = True  # as the model sees the texts it embeds

    def __init__(self, config: EmbeddingsConfig) -> None:
        self.pooling = config.pooling or detect_pooling(config.models_path) or "CLS"
        super().__init__(config)
        self.context = max_model_length(self.hf_config) or DEFAULT_CONTEXT
        vocab = self.hf_config.get("vocab_size")
        self.vocab_size: int | None = vocab if isinstance(vocab, int) else None
        self.dimensions = 0

    @property
    def max_inputs(self) -> int:
        return self.config.max_inputs

    @property
    def normalize(self) -> bool:
        return self.config.normalize

    def _transform(self, model: Any) -> tuple[Any, int]:
        return add_pooling(model, self.pooling, self.config.normalize)

    def _loaded(self, tokenizer: EncoderTokenizer, model: EncoderModel) -> None:
        if self.vocab_size is None:  # ids past the vocabulary would fail a whole batch
            self.vocab_size = len(tokenizer.raw.get_vocab_vector())
        probe = model.run([EncodedInput(np.array([self.pad_token_id], dtype=np.int64))])
        self.dimensions = int(probe.shape[1])

    def _run_batch(self, rows: Sequence[EncodedInput]) -> FloatArray:
        assert self.model is not None
        return self.model.run(rows)

    def _describe(self) -> str:
        assert self.model is not None
        return (
            f"pooling {self.pooling}, normalize {self.config.normalize}, context {self.context}, "
            f"{self.dimensions} dimensions, {self.model.parallel} parallel inferences"
        )

    def _rows_from_texts(self, texts: Sequence[str]) -> list[EncodedInput]:
        assert self.tokenizer is not None
        limit = self.context if self.config.truncate else None
        rows = self.tokenizer.encode(texts, max_length=limit)
        return [EncodedInput(row) for row in rows]

    def _rows_from_ids(self, token_ids: Sequence[Sequence[int]]) -> list[EncodedInput]:
        rows = []
        for index, ids in enumerate(token_ids):
            try:
                array = np.asarray(ids, dtype=np.int64)
            except OverflowError:  # past int64: out of the vocabulary too
                array = np.array([-1], dtype=np.int64)
            if self.vocab_size is not None and (array.min() < 0 or array.max() >= self.vocab_size):
                raise InvalidRequest(
                    f"input[{index}] has a token id outside the vocabulary "
                    f"(0..{self.vocab_size - 1})",
                    param="input",
                )
            if self.config.truncate:
                array = array[: self.context]
            rows.append(EncodedInput(array))
        return rows

    def _check(self, rows: Sequence[EncodedInput]) -> None:
        for index, row in enumerate(rows):
            if len(row) == 0:
                raise InvalidRequest(
                    f"input[{index}] has no tokens; nothing to embed", param="input"
                )
            if len(row) > self.context:
                raise InvalidRequest(
                    f"input[{index}] has {len(row)} tokens, more than the model's context of "
                    f"{self.context} tokens (shorten or split it, or serve the model with "
                    "truncate: true)",
                    param="input",
                )

    async def embed(
        self,
        texts: Sequence[str] | None = None,
        token_ids: Sequence[Sequence[int]] | None = None,
    ) -> Embeddings:
        """One vector per input (pooled, normalised if configured), and the tokens used."""
        if self.batcher is None or self.tokenizer is None:
            raise ServableNotReady(f"Model {self.name} is not loaded")
        with self.admission.request():
            return await self._embed(self.batcher, texts, token_ids)

    async def _embed(
        self,
        batcher: DynamicBatcher[FloatArray],
        texts: Sequence[str] | None,
        token_ids: Sequence[Sequence[int]] | None,
    ) -> Embeddings:
        started = time.perf_counter()
        if texts is not None:
            rows = await asyncio.to_thread(self._rows_from_texts, texts)
        else:
            rows = self._rows_from_ids(token_ids or [])
        self._check(rows)
        tokens = sum(len(row) for row in rows)
        logger.debug("%s: embedding %d inputs, %d tokens", self.name, len(rows), tokens)
        vectors = await batcher.submit(rows)
        self._count(len(rows), tokens, started)
        return Embeddings(np.stack(vectors).astype(np.float32, copy=False), tokens)
