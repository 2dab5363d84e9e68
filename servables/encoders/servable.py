"""What an encoder servable (embeddings, rerank) is apart from its request: its lifecycle.

Both load a tokenizer and an EncoderModel from an exported model directory on a worker thread,
feed the model through a DynamicBatcher whose rows of concurrent requests share inferences, and
bound the requests they take with a CountedAdmission sized to what the batches run at once (the
server sets `max_queued` before `start()`). Only the model's last step (pooling or the logits),
what is checked once it is loaded, how a batch turns into results and the request itself
differ; the subclasses supply those (`_transform`, `_loaded`, `_run_batch`, `_describe`) and keep
their own request method, so this class has no notion of texts, documents or scores.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from servables.encoders.batcher import BatchLimits, DynamicBatcher, EncoderStats
from servables.encoders.model import EncodedInput, EncoderModel
from servables.encoders.model_dir import model_config
from servables.encoders.tokenizer import EncoderTokenizer
from servables.errors import ServableLoadError, ServableNotReady
from servables.io.request_fields import is_integer
from servables.io.text.tokenize import TokenizeRequest, encode
from servables.runtime.admission import CountedAdmission


@dataclass
class EncoderConfig:
    """The settings every encoder servable has; EmbeddingsConfig and RerankConfig add theirs.
    `batch` is keyword-only (callers name it) so that the kinds' own fields follow `properties`
    positionally, as they did when each config spelled out all its fields."""

    name: str
    models_path: Path
    device: str = "CPU"
    properties: dict[str, Any] = field(default_factory=dict)
    batch: BatchLimits = field(default_factory=BatchLimits, kw_only=True)


ConfigT = TypeVar("ConfigT", bound=EncoderConfig)
Result = TypeVar("Result")  # what the batcher hands back per row: a vector, a score


class EncoderServable(ABC, Generic[ConfigT, Result]):
    """See the module docstring; `start()` loads the model (seconds), `stop()` releases it."""

    kind: ClassVar[str]  # "embeddings", "rerank": metrics labels and log and error messages
    # Whether the tokenizer is built for (first, second) pairs (cross-encoders).
    paired: ClassVar[bool] = False
    # `/v3/tokenize` without add_special_tokens: OVMS adds them for embeddings, not for rerank.
    special_tokens_by_default: ClassVar[bool]

    def __init__(self, config: ConfigT) -> None:
        self.config = config
        self.name = config.name
        self.stats = EncoderStats()
        # config.json (read once): the subclasses take their context and more from it.
        self.hf_config = model_config(config.models_path)
        pad = self.hf_config.get("pad_token_id")
        self.pad_token_id = pad if is_integer(pad) else 0
        self.tokenizer: EncoderTokenizer | None = None
        self.model: EncoderModel | None = None
        self.batcher: DynamicBatcher[Result] | None = None
        # Requests the batches run at once: max_batch_size each, once the model's parallel
        # inferences are known (start()); the server sets max_queued before start.
        self.admission = CountedAdmission(config.name, config.batch.max_batch_size)
        # The subclass's module logger, so log names (and their configuration) stay per kind.
        self._logger = logging.getLogger(type(self).__module__)

    async def start(self) -> None:
        started = time.perf_counter()
        await asyncio.to_thread(self._load)
        assert self.model is not None
        self.admission.capacity = self.model.parallel * self.config.batch.max_batch_size
        self.batcher = DynamicBatcher(
            self.name, self._run_batch, self.config.batch, self.model.parallel, self.stats
        )
        self.batcher.start()
        self._logger.info(
            "%s: %s model %s loaded in %.1f s (%s)",
            self.name,
            self.kind,
            self.config.models_path,
            time.perf_counter() - started,
            self._describe(),
        )

    def _load(self) -> None:
        """Blocking (a worker thread): tokenizer and compiled model, then the kind's checks."""
        config = self.config
        try:
            self.tokenizer = EncoderTokenizer(config.models_path, paired=self.paired)
            self.model = EncoderModel(
                config.models_path,
                config.device,
                config.properties,
                self._transform,
                self.pad_token_id,
            )
        except (RuntimeError, ValueError) as error:
            raise ServableLoadError(
                f"{self.name}: cannot load the {self.kind} model: {error}"
            ) from error
        self._loaded(self.tokenizer, self.model)

    async def stop(self) -> None:
        if self.batcher is not None:
            await self.batcher.stop()
            self.batcher = None
        self.model = None
        self.tokenizer = None

    def tokenize(self, request: TokenizeRequest) -> list[list[int]]:
        """`/v3/tokenize`: token ids per text, as the model sees them; special tokens as the
        kind's default (`special_tokens_by_default`) unless the request says."""
        if self.tokenizer is None:
            raise ServableNotReady(f"Model {self.name} is not loaded")
        return encode(
            self.tokenizer.raw, request, special_tokens_by_default=self.special_tokens_by_default
        )

    def _count(self, inputs: int, tokens: int, started: float) -> None:
        """Record a finished request (started at perf_counter `started`) in the stats."""
        stats = self.stats
        stats.requests += 1
        stats.inputs += inputs
        stats.tokens += tokens
        stats.request_seconds.observe(time.perf_counter() - started)

    # What the subclasses supply.

    @abstractmethod
    def _transform(self, model: Any) -> tuple[Any, int]:
        """Rewrite the read ov.Model before it is compiled; see model.ModelTransform."""

    def _loaded(self, tokenizer: EncoderTokenizer, model: EncoderModel) -> None:
        """Checks and probes once the model is loaded (still on the worker thread); raise
        ServableLoadError to refuse the model."""

    @abstractmethod
    def _run_batch(self, rows: Sequence[EncodedInput]) -> Sequence[Result] | Any:
        """One inference (blocking, on a worker thread): one result per row, in order."""

    @abstractmethod
    def _describe(self) -> str:
        """The details the load is logged with."""
