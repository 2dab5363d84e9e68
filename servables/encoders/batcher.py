"""Dynamic batching: rows of concurrent requests run together, one inference per batch.

One inference of 32 short inputs costs little more than one of a single input on a CPU, so
serving concurrent clients one by one wastes most of the machine. Requests put their rows on a
queue; a collector task takes the first waiting row, lets others join it for a short window (or
until the batch is full), runs the batch on a worker thread and hands each request its rows back.
While every infer request is busy, rows keep queueing, so the next batch is fuller: the batch
size follows the load. The window is only waited when the previous batch had company: a lone
client never pays it. Rows are sorted by length before batches are cut, so short inputs are not
padded to a long one, and a batch never holds more than `max_batch_tokens` padded tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from servables.encoders.model import EncodedInput

logger = logging.getLogger(__name__)

Result = TypeVar("Result")
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass(frozen=True)
class BatchLimits:
    max_batch_size: int = 32
    window: float = 0.002  # seconds the first row of a batch waits for others
    max_batch_tokens: int = 16384


@dataclass
class Histogram:
    """Cumulative bucket counts, read by the server's metrics collector (no Prometheus here)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
        self.total += value
        self.count += 1


@dataclass
class EncoderStats:
    """What an encoder servable did, for /metrics."""

    requests: int = 0
    inputs: int = 0
    tokens: int = 0
    batches: int = 0
    batch_sizes: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    request_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))
    inference_seconds: Histogram = field(default_factory=lambda: Histogram(LATENCY_BUCKETS))


@dataclass
class _Pending(Generic[Result]):
    row: EncodedInput
    future: asyncio.Future[Result]


class DynamicBatcher(Generic[Result]):
    """See the module docstring. `run_batch` is blocking; it gets rows and returns one result
    per row, in order."""

    def __init__(
        self,
        name: str,
        run_batch: Callable[[Sequence[EncodedInput]], Sequence[Result] | Any],
        limits: BatchLimits,
        parallel: int = 1,
        stats: EncoderStats | None = None,
    ) -> None:
        self.name = name
        self.run_batch = run_batch
        self.limits = limits
        self.parallel = max(1, parallel)
        self.stats = stats or EncoderStats()
        self._queue: asyncio.Queue[_Pending[Result]] = asyncio.Queue()
        self._slots = asyncio.Semaphore(self.parallel)
        self._executor: ThreadPoolExecutor | None = None
        self._collector: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._last_batch_size = 0

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(self.parallel, thread_name_prefix=f"{self.name}-infer")
        self._collector = asyncio.get_running_loop().create_task(self._collect())

    async def stop(self) -> None:
        if self._collector is not None:
            self._collector.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._collector
            self._collector = None
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        while not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    async def submit(self, rows: Sequence[EncodedInput]) -> list[Result]:
        """Results for `rows`, in order; the rows may run in several batches."""
        if self._collector is None:
            raise RuntimeError(f"{self.name}: the batcher is not running")
        loop = asyncio.get_running_loop()
        pending = [_Pending(row, loop.create_future()) for row in rows]
        for item in pending:
            self._queue.put_nowait(item)
        try:
            return list(await asyncio.gather(*(item.future for item in pending)))
        except BaseException:
            for item in pending:
                item.future.cancel()  # rows not yet run are dropped from their batch
            raise

    async def _collect(self) -> None:
        while True:
            await self._slots.acquire()
            try:
                batch = await self._next_batch()
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.get_running_loop().create_task(self._run(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _next_batch(self) -> list[_Pending[Result]]:
        """Wait for a row, let others join for the window; the rest stays queued."""
        limits = self.limits
        batch = [await self._queue.get()]
        window = limits.window if self._last_batch_size > 1 else 0.0
        deadline = time.monotonic() + window
        while len(batch) < limits.max_batch_size:
            if self._queue.empty():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    batch.append(await asyncio.wait_for(self._queue.get(), remaining))
                except asyncio.TimeoutError:
                    break
            else:
                batch.append(self._queue.get_nowait())
        live = [item for item in batch if not item.future.done()]
        live.sort(key=lambda item: len(item.row))
        kept = self._fit_tokens(live)
        for item in live[len(kept) :]:
            self._queue.put_nowait(item)  # longer rows wait for the next batch
        self._last_batch_size = len(batch)
        return kept

    def _fit_tokens(self, rows: list[_Pending[Result]]) -> list[_Pending[Result]]:
        """The shortest rows whose padded size fits max_batch_tokens (at least one row)."""
        for count in range(len(rows), 0, -1):
            if count * len(rows[count - 1].row) <= self.limits.max_batch_tokens:
                return rows[:count]
        return rows[:1]

    async def _run(self, batch: list[_Pending[Result]]) -> None:
        try:
            if not batch:
                return
            rows = [item.row for item in batch]
            started = time.perf_counter()
            loop = asyncio.get_running_loop()
            try:
                results = await loop.run_in_executor(self._executor, self.run_batch, rows)
            except Exception as error:  # the inference failed: every row of the batch fails
                logger.error("%s: inference of %d rows failed: %s", self.name, len(rows), error)
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(error)
                return
            elapsed = time.perf_counter() - started
            stats = self.stats
            stats.batches += 1
            stats.batch_sizes.observe(len(rows))
            stats.inference_seconds.observe(elapsed)
            logger.debug(
                "%s: batch of %d rows (%d tokens padded) in %.1f ms",
                self.name,
                len(rows),
                len(rows) * max(len(row) for row in rows),
                elapsed * 1000,
            )
            for item, result in zip(batch, results, strict=True):
                if not item.future.done():
                    item.future.set_result(result)
        finally:
            self._slots.release()
