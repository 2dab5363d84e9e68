"""Options the encoder calculators (embeddings, rerank) share, read into servable settings."""

from __future__ import annotations

from typing import Protocol

from servables.encoders.batcher import BatchLimits
from servables.errors import ServableLoadError


class BatchOptions(Protocol):
    max_batch_size: int
    max_batch_tokens: int
    batch_window_us: int


def batch_limits(options: BatchOptions) -> BatchLimits:
    """The dynamic batching limits of an encoder node's options, each checked to be positive."""
    for name in ("max_batch_size", "max_batch_tokens"):
        if getattr(options, name) < 1:
            raise ServableLoadError(f"{name} must be at least 1", param=name)
    return BatchLimits(
        max_batch_size=options.max_batch_size,
        window=options.batch_window_us / 1e6,
        max_batch_tokens=options.max_batch_tokens,
    )
