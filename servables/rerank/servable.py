"""The rerank servable: a query and documents in, one relevance score (0..1) per document.

Scores come from a cross-encoder (a sequence classifier): the sigmoid of its logit when it has
one (bge-reranker, ms-marco cross-encoders), else the softmax probability of label 1, as
openvino-genai's TextRerankPipeline computes them. As in OVMS, the query keeps at most half of
the context; a document longer than what is left is split into chunks of that many tokens, each
chunk is scored with the query, and the document's score is its best chunk's. A request may need
at most `max_allowed_chunks` pairs. Pairs of concurrent requests are batched together. Requests
beyond what the batches run at once queue, up to the server's bound (`admission`, as for LLMs);
past it they are refused with ServableBusy (503, Retry-After).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from servables.encoders.batcher import DynamicBatcher
from servables.encoders.model import EncodedInput, EncoderModel
from servables.encoders.model_dir import max_model_length
from servables.encoders.servable import EncoderConfig, EncoderServable
from servables.encoders.tokenizer import EncoderTokenizer
from servables.errors import InvalidRequest, ServableLoadError, ServableNotReady
from servables.rerank.pairs import PairTemplate, ovms_template, probe_template

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT = 512  # OVMS's, for models whose config.json names none


@dataclass
class RerankConfig(EncoderConfig):
    max_allowed_chunks: int = 10000
    max_position_embeddings: int | None = None  # None: config.json's


@dataclass(frozen=True)
class Scores:
    scores: list[float]  # one per document, in request order
    input_tokens: int
    chunks: int


def logits_output(model: Any) -> tuple[Any, int]:
    """Score with the `logits` output (the first one if none has that name)."""
    for index, output in enumerate(model.outputs):
        if "logits" in output.get_names():
            return model, index
    return model, 0


def to_scores(logits: np.ndarray[Any, Any]) -> list[float]:
    """Sigmoid of a single logit; softmax probability of label 1 for two or more labels."""
    values = logits.astype(np.float64).reshape(len(logits), -1)
    if values.shape[1] == 1:
        probabilities = 1.0 / (1.0 + np.exp(-values[:, 0]))
    else:
        shifted = np.exp(values - values.max(axis=1, keepdims=True))
        probabilities = shifted[:, 1] / shifted.sum(axis=1)
    return [float(p) for p in probabilities]


class RerankServable(EncoderServable[RerankConfig, float]):
    """See the module docstring; the lifecycle is EncoderServable's."""

    kind = "rerank"
    paired = True
    # As OVMS's rerank tokenize: without special tokens unless the request asks for them.
    special_tokens_by_default = False

    def __init__(self, config: RerankConfig) -> None:
        super().__init__(config)
        self.context = (
            config.max_position_embeddings or max_model_length(self.hf_config) or DEFAULT_CONTEXT
        )
        types = self.hf_config.get("type_vocab_size")
        self.typed = isinstance(types, int) and types >= 2
        self.template: PairTemplate | None = None

    @property
    def max_allowed_chunks(self) -> int:
        return self.config.max_allowed_chunks

    def _transform(self, model: Any) -> tuple[Any, int]:
        return logits_output(model)

    def _loaded(self, tokenizer: EncoderTokenizer, model: EncoderModel) -> None:
        typed = self.typed and model.has_token_types
        self.template = probe_template(tokenizer, typed) or ovms_template(
            self.config.models_path, tokenizer
        )
        if self.context <= 2 * self.template.special_tokens:
            raise ServableLoadError(
                f"{self.name}: max_position_embeddings {self.context} leaves no room for a "
                "query and a document",
                param="max_position_embeddings",
            )

    def _run_batch(self, rows: Sequence[EncodedInput]) -> list[float]:
        assert self.model is not None
        return to_scores(self.model.run(rows))

    def _describe(self) -> str:
        assert self.template is not None
        return (
            f"context {self.context}, pair layout from the {self.template.source}: "
            f"{self.template.special_tokens} special tokens, max_allowed_chunks "
            f"{self.config.max_allowed_chunks}"
        )

    def _pairs(
        self,
        query: str,
        documents: Sequence[str],
        max_chunks_per_doc: int | None,
        max_tokens_per_doc: int | None,
    ) -> tuple[list[EncodedInput], list[int]]:
        """The (query, chunk) rows and, per row, the index of its document."""
        assert self.tokenizer is not None and self.template is not None
        limit = self.config.max_allowed_chunks
        if len(documents) > limit:
            raise InvalidRequest(
                f"documents has {len(documents)} items; at most {limit} are allowed "
                "(max_allowed_chunks)",
                param="documents",
            )
        (query_ids,) = self.tokenizer.encode([query], add_special_tokens=False)
        query_ids = query_ids[: self.context // 2]
        chunk_size = self.context - len(query_ids) - self.template.special_tokens
        if chunk_size <= 0:
            raise InvalidRequest("the query leaves no room for documents", param="query")
        rows: list[EncodedInput] = []
        owners: list[int] = []
        for index, ids in enumerate(self.tokenizer.encode(documents, add_special_tokens=False)):
            if max_tokens_per_doc is not None:
                ids = ids[:max_tokens_per_doc]
            pieces = [ids[start : start + chunk_size] for start in range(0, len(ids), chunk_size)]
            if max_chunks_per_doc is not None:
                pieces = pieces[:max_chunks_per_doc]
            for piece in pieces or [ids]:
                rows.append(self.template.build(query_ids, piece))
                owners.append(index)
        if len(rows) > limit:
            raise InvalidRequest(
                f"the documents make {len(rows)} chunks of up to {chunk_size} tokens; at most "
                f"{limit} are allowed (max_allowed_chunks)",
                param="documents",
            )
        return rows, owners

    async def rerank(
        self,
        query: str,
        documents: Sequence[str],
        max_chunks_per_doc: int | None = None,
        max_tokens_per_doc: int | None = None,
    ) -> Scores:
        """One score per document, in request order."""
        if self.batcher is None:
            raise ServableNotReady(f"Model {self.name} is not loaded")
        with self.admission.request():
            return await self._rerank(
                self.batcher, query, documents, max_chunks_per_doc, max_tokens_per_doc
            )

    async def _rerank(
        self,
        batcher: DynamicBatcher[float],
        query: str,
        documents: Sequence[str],
        max_chunks_per_doc: int | None,
        max_tokens_per_doc: int | None,
    ) -> Scores:
        started = time.perf_counter()
        rows, owners = await asyncio.to_thread(
            self._pairs, query, documents, max_chunks_per_doc, max_tokens_per_doc
        )
        tokens = sum(len(row) for row in rows)
        logger.debug(
            "%s: reranking %d documents as %d chunks, %d tokens",
            self.name,
            len(documents),
            len(rows),
            tokens,
        )
        chunk_scores = await batcher.submit(rows)
        scores = [0.0] * len(documents)
        for owner, score in zip(owners, chunk_scores, strict=True):
            scores[owner] = max(scores[owner], score)
        self._count(len(rows), tokens, started)
        return Scores(scores, tokens, len(rows))
