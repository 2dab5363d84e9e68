"""DynamicBatcher: rows of concurrent requests share inferences, within the limits, in order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import numpy as np
import pytest

from servables.encoders.batcher import BatchLimits, DynamicBatcher
from servables.encoders.model import EncodedInput
from servables.runtime.histogram import Histogram


def row(value: int, length: int = 1) -> EncodedInput:
    return EncodedInput(np.full(length, value, dtype=np.int64))


class Recorder:
    """A fake inference: answers each row with its first token id, records batch shapes."""

    def __init__(self, delay: float = 0.0, fail_on: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.delay = delay
        self.fail_on = fail_on
        self.release = threading.Event()
        self.release.set()

    def __call__(self, rows: Sequence[EncodedInput]) -> list[int]:
        self.release.wait(5)
        values = [int(r.ids[0]) for r in rows]
        self.batches.append(values)
        if self.fail_on is not None and self.fail_on in values:
            raise RuntimeError("inference failed")
        return values


async def started(recorder: Recorder, **limits: float) -> DynamicBatcher[int]:
    batcher: DynamicBatcher[int] = DynamicBatcher("test", recorder, BatchLimits(**limits))
    batcher.start()
    return batcher


async def test_concurrent_requests_share_one_inference() -> None:
    recorder = Recorder()
    batcher = await started(recorder, max_batch_size=32, window=0.05)
    results = await asyncio.gather(*(batcher.submit([row(i)]) for i in range(10)))
    await batcher.stop()
    assert results == [[i] for i in range(10)]
    assert len(recorder.batches) == 1 and sorted(recorder.batches[0]) == list(range(10))
    assert batcher.stats.batches == 1 and batcher.stats.batch_sizes.count == 1


async def test_max_batch_size_splits_and_order_is_kept() -> None:
    recorder = Recorder()
    batcher = await started(recorder, max_batch_size=4, window=0.05)
    result = await batcher.submit([row(i) for i in range(10)])
    await batcher.stop()
    assert result == list(range(10))
    assert [len(b) for b in recorder.batches] == [4, 4, 2]


async def test_token_budget_keeps_long_rows_apart() -> None:
    recorder = Recorder()
    batcher = await started(recorder, max_batch_size=32, window=0.05, max_batch_tokens=40)
    rows = [row(1, 10), row(2, 10), row(3, 30), row(4, 10)]
    assert await batcher.submit(rows) == [1, 2, 3, 4]
    await batcher.stop()
    for batch in recorder.batches:
        longest = 30 if 3 in batch else 10
        assert len(batch) * longest <= 40 or len(batch) == 1


async def test_rows_queue_while_the_inference_is_busy() -> None:
    """While one batch runs, arriving rows wait and then go together in the next batch."""
    recorder = Recorder()
    recorder.release.clear()
    batcher = await started(recorder, max_batch_size=32, window=0.0)
    first = asyncio.ensure_future(batcher.submit([row(0)]))
    await asyncio.sleep(0.05)
    rest = [asyncio.ensure_future(batcher.submit([row(i)])) for i in range(1, 6)]
    await asyncio.sleep(0.05)
    recorder.release.set()
    assert await first == [0]
    assert [await r for r in rest] == [[i] for i in range(1, 6)]
    await batcher.stop()
    assert recorder.batches[0] == [0]
    assert sorted(recorder.batches[1]) == [1, 2, 3, 4, 5]


async def test_a_failed_inference_fails_its_rows_only() -> None:
    """A batch mixing requests fails: each request's rows run again on their own, and only
    the request whose row makes the model fail gets the error."""
    recorder = Recorder(fail_on=7)
    recorder.release.clear()
    batcher = await started(recorder, max_batch_size=32, window=0.05)
    busy = asyncio.ensure_future(batcher.submit([row(0)]))
    await asyncio.sleep(0.05)  # the next requests queue behind the busy inference, together
    requests = [
        asyncio.ensure_future(batcher.submit(rows))
        for rows in ([row(1)], [row(7), row(8)], [row(2), row(3)])
    ]
    await asyncio.sleep(0.05)
    recorder.release.set()
    assert await busy == [0]
    good, bad, other = await asyncio.gather(*requests, return_exceptions=True)
    assert good == [1] and other == [2, 3]
    assert isinstance(bad, RuntimeError)
    assert sorted(recorder.batches[1]) == [1, 2, 3, 7, 8], "the requests shared a batch"
    assert await batcher.submit([row(4)]) == [4]
    await batcher.stop()


async def test_a_lone_failing_request_is_not_retried() -> None:
    recorder = Recorder(fail_on=7)
    batcher = await started(recorder, max_batch_size=32, window=0.0)
    with pytest.raises(RuntimeError):
        await batcher.submit([row(1), row(7)])
    await batcher.stop()
    assert recorder.batches == [[1, 7]]


async def test_rows_cut_by_the_token_budget_lead_the_next_batch() -> None:
    """A long row that did not fit is not cut again and again by newer short rows."""
    gate = threading.Semaphore(0)
    batches: list[list[int]] = []

    def run(rows: Sequence[EncodedInput]) -> list[int]:
        batches.append([int(r.ids[0]) for r in rows])
        gate.acquire(timeout=5)
        return [int(r.ids[0]) for r in rows]

    async def until(count: int) -> None:
        for _ in range(500):
            if len(batches) >= count:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"expected {count} batches, got {batches}")

    batcher: DynamicBatcher[int] = DynamicBatcher(
        "test", run, BatchLimits(max_batch_size=32, window=0.0, max_batch_tokens=40)
    )
    batcher.start()
    requests = [asyncio.ensure_future(batcher.submit([row(0, 10)]))]
    await until(1)
    requests.append(asyncio.ensure_future(batcher.submit([row(99, 30)])))
    requests += [asyncio.ensure_future(batcher.submit([row(i, 10)])) for i in (1, 2, 3)]
    await asyncio.sleep(0.05)
    gate.release()
    await until(2)
    assert batches[1] == [1, 2, 3]  # shortest first; the long row did not fit
    requests += [asyncio.ensure_future(batcher.submit([row(i, 10)])) for i in (4, 5, 6)]
    await asyncio.sleep(0.05)
    gate.release()
    await until(3)
    assert batches[2] == [99], "the carried-over row must go first"
    for _ in range(10):
        gate.release()
    results = await asyncio.gather(*requests)
    await batcher.stop()
    assert results == [[0], [99], [1], [2], [3], [4], [5], [6]]


async def test_a_cancelled_request_drops_its_waiting_rows() -> None:
    recorder = Recorder()
    recorder.release.clear()
    batcher = await started(recorder, max_batch_size=1, window=0.0)
    busy = asyncio.ensure_future(batcher.submit([row(1)]))
    await asyncio.sleep(0.05)
    cancelled = asyncio.ensure_future(batcher.submit([row(2), row(3)]))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    recorder.release.set()
    assert await busy == [1]
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert await batcher.submit([row(4)]) == [4]
    await batcher.stop()
    ran = {value for batch in recorder.batches for value in batch}
    assert ran == {1, 4}


async def test_submit_before_start_is_an_error() -> None:
    batcher: DynamicBatcher[int] = DynamicBatcher("idle", Recorder(), BatchLimits())
    with pytest.raises(RuntimeError, match="not running"):
        await batcher.submit([row(1)])


def test_histogram_is_cumulative() -> None:
    histogram = Histogram((1, 4, 16))
    for value in (1, 3, 4, 20):
        histogram.observe(value)
    assert histogram.counts == [1, 3, 3]
    assert histogram.count == 4 and histogram.total == 28


async def test_a_lone_client_never_waits_for_the_window() -> None:
    """The window (an hour here) is waited only after a batch that had company."""
    recorder = Recorder()
    batcher = await started(recorder, max_batch_size=32, window=3600.0)
    for value in range(3):
        assert await asyncio.wait_for(batcher.submit([row(value)]), 60) == [value]
    await batcher.stop()
    assert recorder.batches == [[0], [1], [2]]
