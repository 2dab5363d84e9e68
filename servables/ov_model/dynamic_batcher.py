"""Dynamic batching of a plain model's calls: stacked along dimension 0, run once, split back.

One inference over 16 rows costs a CPU little more than one over a single row (the weights are
read once), so concurrent callers are served far more cheaply together. Calls that have been
checked against the model wait in a FIFO queue; a batch is the oldest waiting call plus the later
ones with the same *signature* (input names, dtypes and every dimension but the first: only
those can be stacked), up to `max_batch_size` rows. The batch runs when

- it is full (`max_batch_size` rows), or
- its rows make up a `preferred_batch_size` (the largest one the queue can form; the later
  calls stay queued), or
- its oldest call has waited `max_queue_delay_microseconds`,

and fewer than `max_concurrent_batches` batches are running. A call that arrives to an empty
queue while a batch slot is free runs at once, in the caller's task, as a batch of one, unless
the last batch had company: a lone caller never pays the queue delay (nor a task switch), while
under load the first call after a batch waits up to the delay for the calls that are surely
coming (else batches would alternate between one call run at once and the rest queued behind
it, halving the mean batch). Once a batch of one runs, the next idle call runs at once again:
one wait at most when the load drops. Calls of other signatures stay in the queue, in order,
and form their own batches.

A batch runs in a task of its own, so a caller that is cancelled (a client gone) only loses its
place: a queued call is dropped when a batch is formed, a running one's rows are computed and
discarded. When a batch of several calls fails, each call is run again alone, so only the call
whose data makes the model fail gets the error. Results are rows sliced out of the batch's
outputs: the same numbers per-call inference gives (tests/unit/test_dynamic_batcher.py and the
end-to-end tests compare them bit for bit).
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from servables.errors import ServableError
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.runtime.histogram import Histogram

logger = logging.getLogger(__name__)

Arrays = Mapping[str, np.ndarray[Any, Any]]
# Runs one inference: inputs -> the named outputs (all outputs are asked for a batch).
RunInference = Callable[[Arrays, list[str]], Awaitable[dict[str, np.ndarray[Any, Any]]]]

BATCH_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
QUEUE_SECONDS_BUCKETS = (1e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.1)


@dataclass
class BatchStats:
    """What a batcher did, for /metrics (graphrt/observability/batch_metrics.py).

    A lone call (the idle path) only bumps `lone_rows`, a count per row count (~0.1 us instead
    of three histogram updates, which cost a lone caller ~10 us); `histograms()` folds them in
    when /metrics is read."""

    batches: int = 0
    requests: int = 0
    rows: int = 0
    failed_batches: int = 0  # batches whose calls were run again one by one
    batch_rows: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    batch_requests: Histogram = field(default_factory=lambda: Histogram(BATCH_SIZE_BUCKETS))
    queue_seconds: Histogram = field(default_factory=lambda: Histogram(QUEUE_SECONDS_BUCKETS))
    lone_rows: dict[int, int] = field(default_factory=dict)

    def histograms(self) -> tuple[Histogram, Histogram, Histogram]:
        """(rows per batch, calls per batch, queue seconds), lone calls included."""
        rows, calls, queued = (
            copy.deepcopy(h) for h in (self.batch_rows, self.batch_requests, self.queue_seconds)
        )
        for count, times in self.lone_rows.items():
            for histogram, value in ((rows, count), (calls, 1), (queued, 0.0)):
                for index, bound in enumerate(histogram.bounds):
                    if value <= bound:
                        histogram.counts[index] += times
                histogram.total += value * times
                histogram.count += times
        return rows, calls, queued

    @property
    def all_batches(self) -> int:
        return self.batches + sum(self.lone_rows.values())

    @property
    def all_requests(self) -> int:
        return self.requests + sum(self.lone_rows.values())

    @property
    def all_rows(self) -> int:
        return self.rows + sum(rows * times for rows, times in self.lone_rows.items())


@dataclass(eq=False)
class _Call:
    inputs: Arrays
    wanted: list[str]
    signature: Hashable
    rows: int
    queued_at: float
    future: asyncio.Future[dict[str, np.ndarray[Any, Any]]]


def signature(inputs: Arrays) -> tuple[Hashable, int] | None:
    """The key calls must share to be stacked, and the call's rows; None when the inputs have
    no common dimension 0 (a scalar, or inputs of different lengths): such a call runs alone."""
    rows = None
    key = []
    for name in sorted(inputs):
        array = inputs[name]
        if array.ndim == 0 or (rows is not None and array.shape[0] != rows):
            return None
        rows = array.shape[0]
        key.append((name, array.dtype.str, array.shape[1:]))
    if rows is None:
        return None
    return tuple(key), rows


class DynamicBatcher:
    """See the module docstring. `run` is the model's checked inference (it may raise
    ServableError); `outputs` names every output, which a batch computes for all its callers."""

    def __init__(
        self,
        name: str,
        config: DynamicBatchingConfig,
        run: RunInference,
        outputs: Sequence[str],
        stats: BatchStats | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._slots = config.max_concurrent_batches or 1
        self._run = run
        self._outputs = list(outputs)
        self.stats = stats if stats is not None else BatchStats()
        self._queue: deque[_Call] = deque()
        self._running = 0
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Whether the last batch had more than one call: then a call that finds the model idle
        # still queues, for up to the queue delay, since company is likely (module docstring).
        self._company = False

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def submit(self, inputs: Arrays, wanted: list[str]) -> dict[str, np.ndarray[Any, Any]]:
        """The call's wanted outputs, computed in a batch with whatever calls it can join."""
        if not self._queue and self._running < self._slots and not self._company:
            # The idle path: nothing queued and a slot free, so no reason to wait (and no
            # signature needed). Kept lean: a lone caller's latency is what it costs.
            self._running += 1
            try:
                return await self._run(inputs, wanted)
            finally:
                self._running -= 1
                self._company = False
                first = next(iter(inputs.values()), None)
                rows = first.shape[0] if first is not None and first.ndim else 1
                lone = self.stats.lone_rows
                lone[rows] = lone.get(rows, 0) + 1
                if self._queue:
                    self._dispatch()
        found = signature(inputs)
        if found is None:
            return await self._run(inputs, wanted)
        key, rows = found
        loop = asyncio.get_running_loop()
        call = _Call(inputs, wanted, key, rows, loop.time(), loop.create_future())
        self._queue.append(call)
        self._dispatch()
        return await call.future

    # ----------------------------------------------------------------------- forming batches

    def _dispatch(self) -> None:
        """Start every batch that is due while slots are free; else wake up when one is."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        loop = asyncio.get_running_loop()
        while self._queue and self._running < self._slots:
            while self._queue and self._queue[0].future.done():
                self._queue.popleft()  # its caller was cancelled while it waited
            if not self._queue:
                return
            batch, wait = self._form(loop.time())
            if not batch:
                self._timer = loop.call_later(wait, self._dispatch)
                return
            for call in batch:
                self._queue.remove(call)
            self._running += 1
            task = loop.create_task(self._run_batch(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _form(self, now: float) -> tuple[list[_Call], float]:
        """The batch of the oldest call, if due now; else ([], seconds until it is due)."""
        head = self._queue[0]
        limit = self.config.max_batch_size
        batch = [head]
        rows = head.rows
        if rows < limit:
            for call in list(self._queue)[1:]:
                if call.signature != head.signature or call.future.done():
                    continue
                if rows + call.rows > limit:
                    break
                batch.append(call)
                rows += call.rows
                if rows == limit:
                    break
        if rows >= limit:
            return batch, 0.0
        preferred = self._preferred_cut(batch)
        if preferred:
            return batch[:preferred], 0.0
        waited = now - head.queued_at
        if waited >= self.config.max_queue_delay_seconds:
            return batch, 0.0
        return [], self.config.max_queue_delay_seconds - waited

    def _preferred_cut(self, batch: list[_Call]) -> int:
        """How many calls make up the largest preferred size (0: none can be formed)."""
        sizes = self.config.preferred_batch_size
        if not sizes:
            return 0
        cut, rows = 0, 0
        for index, call in enumerate(batch, 1):
            rows += call.rows
            if rows in sizes:
                cut = index
        return cut

    # ----------------------------------------------------------------------- running batches

    async def _run_batch(self, batch: list[_Call]) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        rows = sum(call.rows for call in batch)
        self._company = len(batch) > 1
        try:
            waited = max(started - call.queued_at for call in batch)
            self._count(rows, len(batch), waited)
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug(
                    "%s: batch of %d rows from %d calls (oldest waited %.0f us, %d queued)",
                    self.name,
                    rows,
                    len(batch),
                    waited * 1e6,
                    len(self._queue),
                )
            if len(batch) == 1:
                await self._run_one(batch[0])
                return
            inputs = {
                name: np.concatenate([call.inputs[name] for call in batch])
                for name in batch[0].inputs
            }
            try:
                results = await self._run(inputs, self._outputs)
                parts = _split(results, [call.rows for call in batch])
            except ServableError as error:
                self.stats.failed_batches += 1
                logger.info(
                    "%s: a batch of %d calls failed (%s); running each alone",
                    self.name,
                    len(batch),
                    error.message,
                )
                for call in batch:
                    await self._run_one(call)
                return
            for call, part in zip(batch, parts, strict=True):
                if not call.future.done():
                    call.future.set_result({name: part[name] for name in call.wanted})
        except BaseException as error:  # never leave a caller waiting
            for call in batch:
                if not call.future.done():
                    if isinstance(error, Exception):
                        call.future.set_exception(error)
                    else:
                        call.future.cancel()
            if not isinstance(error, Exception):
                raise
            logger.exception("%s: batch failed", self.name)
        finally:
            self._running -= 1
            self._dispatch()

    async def _run_one(self, call: _Call) -> None:
        if call.future.done():
            return
        try:
            result = await self._run(call.inputs, call.wanted)
        except ServableError as error:
            if not call.future.done():
                call.future.set_exception(error)
        else:
            if not call.future.done():
                call.future.set_result(result)

    def _count(self, rows: int, calls: int, waited: float) -> None:
        stats = self.stats
        stats.batches += 1
        stats.requests += calls
        stats.rows += rows
        stats.batch_rows.observe(rows)
        stats.batch_requests.observe(calls)
        stats.queue_seconds.observe(waited)


def _split(
    results: Mapping[str, np.ndarray[Any, Any]], rows: Sequence[int]
) -> list[dict[str, np.ndarray[Any, Any]]]:
    """Each call's rows of every output (views of the batch's arrays, which nobody else holds).

    An output without the batch's rows along dimension 0 cannot be split: the batch fails and
    its calls run alone."""
    total = sum(rows)
    for name, value in results.items():
        if value.ndim == 0 or value.shape[0] != total:
            raise ServableError(
                f"output {name} of shape {list(value.shape)} has no batch dimension of {total}"
            )
    parts: list[dict[str, np.ndarray[Any, Any]]] = []
    start = 0
    for count in rows:
        parts.append({name: value[start : start + count] for name, value in results.items()})
        start += count
    return parts
