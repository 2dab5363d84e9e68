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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servables.admission import CountedAdmission
from servables.encoders.batcher import BatchLimits, DynamicBatcher, EncoderStats
from servables.encoders.model import EncodedInput, EncoderModel
from servables.encoders.model_dir import max_model_length, model_config
from servables.encoders.tokenizer import EncoderTokenizer
from servables.errors import InvalidRequest, ServableLoadError, ServableNotReady
from servables.openai.tokenize import TokenizeRequest, encode
from servables.rerank.pairs import PairTemplate, ovms_template, probe_template

logger = logging.getLogger(__name__)

DEFAULT_CONTEXT = 512  # OVMS's, for models whose config.json names none


@dataclass
class RerankConfig:
    name: str
    models_path: Path
    device: str = "CPU"
    properties: dict[str, Any] = field(default_factory=dict)
    max_allowed_chunks: int = 10000
    max_position_embeddings: int | None = None  # None: config.json's
    batch: BatchLimits = field(default_factory=BatchLimits)


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


class RerankServable:
    """See the module docstring; `start()` loads the model, `stop()` releases it."""

    kind = "rerank"

    def __init__(self, config: RerankConfig) -> None:
        self.config = config
        self.name = config.name
        self.stats = EncoderStats()
        hf_config = model_config(config.models_path)
        self.context = (
            config.max_position_embeddings or max_model_length(hf_config) or DEFAULT_CONTEXT
        )
        types = hf_config.get("type_vocab_size")
        self.typed = isinstance(types, int) and types >= 2
        pad = hf_config.get("pad_token_id")
        self.pad_token_id = pad if isinstance(pad, int) and not isinstance(pad, bool) else 0
        self.tokenizer: EncoderTokenizer | None = None
        self.model: EncoderModel | None = None
        self.template: PairTemplate | None = None
        self.batcher: DynamicBatcher[float] | None = None
        # Requests the batches run at once (see EmbeddingsServable); max_queued is the server's.
        self.admission = CountedAdmission(config.name, config.batch.max_batch_size)

    @property
    def max_allowed_chunks(self) -> int:
        return self.config.max_allowed_chunks

    async def start(self) -> None:
        started = time.perf_counter()
        await asyncio.to_thread(self._load)
        assert self.model is not None and self.template is not None
        self.admission.capacity = self.model.parallel * self.config.batch.max_batch_size
        self.batcher = DynamicBatcher(
            self.name, self._score, self.config.batch, self.model.parallel, self.stats
        )
        self.batcher.start()
        logger.info(
            "%s: rerank model %s loaded in %.1f s (context %d, pair layout from the %s: %d "
            "special tokens, max_allowed_chunks %d)",
            self.name,
            self.config.models_path,
            time.perf_counter() - started,
            self.context,
            self.template.source,
            self.template.special_tokens,
            self.config.max_allowed_chunks,
        )

    def _load(self) -> None:
        config = self.config
        try:
            self.tokenizer = EncoderTokenizer(config.models_path, paired=True)
            self.model = EncoderModel(
                config.models_path,
                config.device,
                config.properties,
                logits_output,
                self.pad_token_id,
            )
        except (RuntimeError, ValueError) as error:
            raise ServableLoadError(
                f"{self.name}: cannot load the rerank model: {error}"
            ) from error
        typed = self.typed and self.model.has_token_types
        self.template = probe_template(self.tokenizer, typed) or ovms_template(
            config.models_path, self.tokenizer
        )
        if self.context <= 2 * self.template.special_tokens:
            raise ServableLoadError(
                f"{self.name}: max_position_embeddings {self.context} leaves no room for a "
                "query and a document",
                param="max_position_embeddings",
            )

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()
            self.batcher = None
        self.model = None
        self.tokenizer = None

    def _score(self, rows: Sequence[EncodedInput]) -> list[float]:
        assert self.model is not None
        return to_scores(self.model.run(rows))

    def tokenize(self, request: TokenizeRequest) -> list[list[int]]:
        """`/v3/tokenize`: token ids per text; as OVMS's rerank tokenize, without special
        tokens unless the request asks for them."""
        if self.tokenizer is None:
            raise ServableNotReady(f"Model {self.name} is not loaded")
        return encode(self.tokenizer.raw, request, special_tokens_by_default=False)

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
        stats = self.stats
        stats.requests += 1
        stats.inputs += len(rows)
        stats.tokens += tokens
        stats.request_seconds.observe(time.perf_counter() - started)
        return Scores(scores, tokens, len(rows))
