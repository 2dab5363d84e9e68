"""Dynamic batching: rows of concurrent requests run together, one inference per batch.

One inference of 32 short inputs costs little more than one of a single input on a CPU, so
serving concurrent clients one by one wastes most of the machine. Requests put their rows on a
queue; a collector task takes the first waiting row, lets others join it for a short window (or
until the batch is full), runs the batch on a worker thread and hands each request its rows back.
While every infer request is busy, rows keep queueing, so the next batch is fuller: the batch
size follows the load. The window is only waited when the previous batch had company: a lone
client never pays it. Rows are sorted by length before batches are cut, so short inputs are not
padded to a long one, and a batch never holds more than `max_batch_tokens` padded tokens. Rows
that did not fit are carried over and go first in the next batch, so a long row never starves
behind a stream of short ones. When an inference fails for a batch that holds rows of several
requests, each request's rows are run again on their own: only the request whose input makes
the model fail gets the error.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from servables.encoders.model import EncodedInput
from servables.runtime.histogram import LATENCY_BUCKETS, Histogram

logger = logging.getLogger(__name__)

Result = TypeVar("Result")
BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclass(frozen=True)
class BatchLimits:
    max_batch_size: int = 32
    window: float = 0.002  # seconds the first row of a batch waits for others
    max_batch_tokens: int = 16384


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
    request: int = 0  # which submit() the row belongs to


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
        # Rows cut from a batch by the token budget: they lead the next batch.
        self._carried: deque[_Pending[Result]] = deque()
        self._requests = itertools.count()
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
        while self._carried:
            pending = self._carried.popleft()
            if not pending.future.done():
                pending.future.cancel()
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
        request = next(self._requests)
        pending = [_Pending(row, loop.create_future(), request) for row in rows]
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
        """Carried-over rows first, else wait for a row; let others join for the window; what
        does not fit is carried over to lead the next batch."""
        limits = self.limits
        carried = [item for item in self._carried if not item.future.done()]
        self._carried.clear()
        batch = list(carried) if carried else [await self._queue.get()]
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
        fresh = [item for item in batch[len(carried) :] if not item.future.done()]
        fresh.sort(key=lambda item: len(item.row))
        kept, left = self._fit_tokens(carried + fresh)
        self._carried.extend(left)  # in priority order: earlier carried rows stay ahead
        self._last_batch_size = len(batch)
        return kept

    def _fit_tokens(
        self, rows: list[_Pending[Result]]
    ) -> tuple[list[_Pending[Result]], list[_Pending[Result]]]:
        """The rows, in priority order, whose padded size fits max_batch_tokens (at least the
        first), and the ones left over."""
        kept: list[_Pending[Result]] = []
        longest = 0
        for index, item in enumerate(rows):
            longest = max(longest, len(item.row))
            if kept and (len(kept) + 1) * longest > self.limits.max_batch_tokens:
                return kept, rows[index:]
            kept.append(item)
        return kept, []

    def _infer(self, rows: Sequence[EncodedInput]) -> Sequence[Result]:
        """One inference (blocking, on a worker thread), recorded in the stats."""
        started = time.perf_counter()
        results = self.run_batch(rows)
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
        return list(results)

    async def _run(self, batch: list[_Pending[Result]]) -> None:
        try:
            if batch:
                await self._run_rows(batch, retry_alone=True)
        finally:
            self._slots.release()

    async def _run_rows(self, batch: list[_Pending[Result]], retry_alone: bool) -> None:
        """Run `batch` and settle its futures. If the inference fails and the batch holds rows
        of several requests, each request's rows run again on their own (`retry_alone`), so
        only the requests whose rows make the model fail get the error."""
        loop = asyncio.get_running_loop()
        rows = [item.row for item in batch]
        try:
            results = await loop.run_in_executor(self._executor, self._infer, rows)
        except Exception as error:
            requests: dict[int, list[_Pending[Result]]] = {}
            for item in batch:
                requests.setdefault(item.request, []).append(item)
            if retry_alone and len(requests) > 1:
                logger.warning(
                    "%s: inference of %d rows of %d requests failed (%s); running each "
                    "request's rows on their own",
                    self.name,
                    len(rows),
                    len(requests),
                    error,
                )
                for items in requests.values():
                    live = [item for item in items if not item.future.done()]
                    if live:
                        await self._run_rows(live, retry_alone=False)
                return
            logger.error("%s: inference of %d rows failed: %s", self.name, len(rows), error)
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        for item, result in zip(batch, results, strict=True):
            if not item.future.done():
                item.future.set_result(result)
