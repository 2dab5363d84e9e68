"""The `dynamic_batching` object of a model_config_list entry, in Triton's names.

OVMS has no dynamic batching (its `batch_size: "auto"` reshapes the model to each request
instead), so this is our extension of its config.json; the keys are Triton's so a Triton user's
`dynamic_batching` block reads the same here:

    "dynamic_batching": {"max_batch_size": 16, "preferred_batch_size": [4, 8],
                         "max_queue_delay_microseconds": 500}

`max_concurrent_batches` is ours: how many batches of one model version run at once (Triton
says the same with the model's `instance_group` count). By default it is the compiled model's
number of streams (at most its `nireq`): a batch runs on one stream, which on CPU has its own
cores, so with one batch at a time the other streams' cores would sit idle (measured with
benchmarks/kserve.py on 2 cores and a 65536-wide MLP: 1.8x per-call's calls/s with one batch at
a time, 2.1x with two). docs/dynamic-batching.md has the semantics of each key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servables.io.request_fields import is_integer

DEFAULT_MAX_BATCH_SIZE = 16
KEYS = frozenset(
    {
        "max_batch_size",
        "preferred_batch_size",
        "max_queue_delay_microseconds",
        "max_concurrent_batches",
    }
)


@dataclass(frozen=True)
class DynamicBatchingConfig:
    """How calls to one model are stacked along the batch dimension (see the module docstring).

    Sizes count rows (dimension 0), not requests: a request of 3 rows fills 3 of
    `max_batch_size`.
    """

    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE
    preferred_batch_size: tuple[int, ...] = ()
    max_queue_delay_microseconds: int = 0
    max_concurrent_batches: int | None = None  # None: the model's streams (module docstring)

    @property
    def max_queue_delay_seconds(self) -> float:
        return self.max_queue_delay_microseconds / 1e6

    def with_concurrency(self, streams: int, nireq: int) -> DynamicBatchingConfig:
        """`max_concurrent_batches` settled for a loaded model: as configured, else its streams
        (at most `nireq`, at least 1)."""
        if self.max_concurrent_batches is not None:
            return self
        concurrent = max(1, min(streams, nireq))
        return DynamicBatchingConfig(
            self.max_batch_size,
            self.preferred_batch_size,
            self.max_queue_delay_microseconds,
            concurrent,
        )

    @classmethod
    def from_json(cls, value: Any, where: str) -> DynamicBatchingConfig | None:
        """Parse the object (`{}` enables batching with the defaults; absent or `false`
        disables it); raises ValueError naming the key at `where`."""
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if not isinstance(value, dict):
            raise ValueError(f"{where} must be an object")
        unknown = sorted(set(value) - KEYS)
        if unknown:
            raise ValueError(
                f"unknown key {unknown[0]!r} in {where}; it takes " + ", ".join(sorted(KEYS))
            )
        size = _positive(value, "max_batch_size", DEFAULT_MAX_BATCH_SIZE, where)
        concurrent = value.get("max_concurrent_batches")
        if concurrent is not None:
            concurrent = _positive(value, "max_concurrent_batches", 1, where)
        delay = value.get("max_queue_delay_microseconds", 0)
        if not is_integer(delay) or delay < 0:
            raise ValueError(f"{where}.max_queue_delay_microseconds must be a non-negative integer")
        preferred = value.get("preferred_batch_size", [])
        if is_integer(preferred):
            preferred = [preferred]
        if not isinstance(preferred, list) or not all(
            is_integer(p) and 0 < p <= size for p in preferred
        ):
            raise ValueError(
                f"{where}.preferred_batch_size must be a list of integers from 1 to "
                f"max_batch_size ({size})"
            )
        return cls(size, tuple(sorted(set(preferred))), delay, concurrent)


def _positive(value: dict[str, Any], key: str, default: int, where: str) -> int:
    number = value.get(key, default)
    if not is_integer(number) or number < 1:
        raise ValueError(f"{where}.{key} must be a positive integer")
    return number
