"""The dynamic batcher of plain models, over a fake inference that records the batches it gets.

The fake computes each row on its own (y = 2x + the row's sum), so a batch's results split back
are exactly what each call alone would get; a gate lets a test hold the "model" busy while calls
queue. No timing: the queue delay is either 0 or an hour, so nothing depends on how fast the
machine is (the `wait_for` bounds only turn a hang into a failure).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from servables.errors import ServableError
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.ov_model.dynamic_batcher import DynamicBatcher, signature

HOUR_US = 3_600_000_000
GUARD = 30.0  # seconds before a hang fails the test


class FakeModel:
    """Records each inference's rows; waits for `gate` while it is set up; fails on NaN."""

    def __init__(self) -> None:
        self.batches: list[int] = []
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()

    async def run(
        self, inputs: Mapping[str, np.ndarray[Any, Any]], wanted: list[str]
    ) -> dict[str, np.ndarray[Any, Any]]:
        x = inputs["x"]
        self.batches.append(x.shape[0])
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        if np.isnan(x).any():
            raise ServableError("inference failed: NaN")
        outputs = {"y": expected(x), "n": np.full((x.shape[0],), x.shape[1])}
        return {name: outputs[name] for name in wanted}


def expected(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    result: np.ndarray[Any, Any] = 2 * x + x.sum(axis=1, keepdims=True)
    return result


def rows(count: int, seed: int, width: int = 3) -> np.ndarray[Any, Any]:
    return np.random.default_rng(seed).standard_normal((count, width)).astype(np.float32)


def batcher(fake: FakeModel, **config: Any) -> DynamicBatcher:
    settings = {"max_queue_delay_microseconds": 0, **config}
    parsed = DynamicBatchingConfig.from_json(settings, "dynamic_batching")
    assert parsed is not None
    return DynamicBatcher("fake", parsed, fake.run, ["y", "n"])


async def hold_busy(fake: FakeModel, subject: DynamicBatcher) -> asyncio.Task[Any]:
    """A first call that occupies the only batch slot until `fake.gate` is set."""
    fake.gate = asyncio.Event()
    first = asyncio.create_task(subject.submit({"x": rows(1, 99)}, ["y"]))
    await asyncio.wait_for(fake.started.wait(), GUARD)
    return first


async def queue(subject: DynamicBatcher, *arrays: np.ndarray[Any, Any]) -> list[asyncio.Task[Any]]:
    tasks = [asyncio.create_task(subject.submit({"x": a}, ["y"])) for a in arrays]
    while subject.queued < len(arrays) and not all(t.done() for t in tasks):
        await asyncio.sleep(0)
    return tasks


async def test_a_lone_call_runs_at_once_without_the_queue_delay() -> None:
    fake = FakeModel()
    subject = batcher(fake, max_queue_delay_microseconds=HOUR_US)
    x = rows(1, 0)
    result = await asyncio.wait_for(subject.submit({"x": x}, ["y"]), GUARD)
    np.testing.assert_array_equal(result["y"], expected(x))
    assert fake.batches == [1]
    assert subject.stats.lone_rows == {1: 1} and subject.stats.batches == 0
    rows_per_batch, calls_per_batch, queued = subject.stats.histograms()
    assert (rows_per_batch.count, rows_per_batch.total, calls_per_batch.total) == (1, 1, 1)
    assert queued.total == 0.0


async def test_calls_queued_while_the_model_is_busy_run_as_one_batch_with_their_own_rows() -> None:
    fake = FakeModel()
    subject = batcher(fake)
    first = await hold_busy(fake, subject)
    inputs = [rows(1, seed) for seed in range(4)] + [rows(3, 10)]
    tasks = await queue(subject, *inputs)
    assert fake.gate is not None
    fake.gate.set()
    results = await asyncio.wait_for(asyncio.gather(first, *tasks), GUARD)
    assert fake.batches == [1, 7]  # four calls of one row and one of three
    for x, result in zip(inputs, results[1:], strict=True):
        assert list(result) == ["y"]
        np.testing.assert_array_equal(result["y"], expected(x))
    rows_per_batch, calls_per_batch, _ = subject.stats.histograms()
    assert rows_per_batch.count == subject.stats.all_batches == 2
    assert rows_per_batch.total == subject.stats.all_rows == 8
    assert calls_per_batch.total == subject.stats.all_requests == 6
    assert calls_per_batch.counts[0] == 1  # the lone first call; the other batch held five


async def test_max_batch_size_caps_the_rows_of_a_batch() -> None:
    fake = FakeModel()
    subject = batcher(fake, max_batch_size=4)
    first = await hold_busy(fake, subject)
    inputs = [rows(1, 1), rows(2, 2), rows(2, 3), rows(1, 4), rows(6, 5)]
    tasks = await queue(subject, *inputs)
    assert fake.gate is not None
    fake.gate.set()
    results = await asyncio.wait_for(asyncio.gather(first, *tasks), GUARD)
    # 1+2 (the next 2 would make 5), then 2+1, then the call of 6 rows alone.
    assert fake.batches == [1, 3, 3, 6]
    for x, result in zip(inputs, results[1:], strict=True):
        np.testing.assert_array_equal(result["y"], expected(x))


async def test_calls_of_different_shapes_or_dtypes_are_never_stacked() -> None:
    fake = FakeModel()
    subject = batcher(fake)
    first = await hold_busy(fake, subject)
    inputs = [rows(1, 1), rows(1, 2, width=5), rows(1, 3).astype(np.float64), rows(2, 4)]
    tasks = await queue(subject, *inputs)
    assert fake.gate is not None
    fake.gate.set()
    results = await asyncio.wait_for(asyncio.gather(first, *tasks), GUARD)
    assert fake.batches == [1, 3, 1, 1]  # widths 3 (1+2 rows), 5, then the float64 call
    for x, result in zip(inputs, results[1:], strict=True):
        np.testing.assert_array_equal(result["y"], expected(x))
        assert result["y"].dtype == x.dtype


async def test_a_preferred_size_runs_at_once_and_the_rest_waits_for_the_delay() -> None:
    fake = FakeModel()
    subject = batcher(
        fake, max_batch_size=8, preferred_batch_size=[2], max_queue_delay_microseconds=HOUR_US
    )
    first = await hold_busy(fake, subject)
    tasks = await queue(subject, rows(1, 1), rows(1, 2), rows(1, 3))
    assert fake.gate is not None
    fake.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *tasks[:2]), GUARD)
    assert fake.batches == [1, 2]
    assert subject.queued == 1 and not tasks[2].done()  # waiting for company, not run alone
    late = await queue(subject, rows(1, 4))  # company: a preferred batch of 2 again
    await asyncio.wait_for(asyncio.gather(tasks[2], *late), GUARD)
    assert fake.batches == [1, 2, 2]


async def test_a_full_batch_does_not_wait_for_the_delay() -> None:
    fake = FakeModel()
    subject = batcher(fake, max_batch_size=3, max_queue_delay_microseconds=HOUR_US)
    first = await hold_busy(fake, subject)
    tasks = await queue(subject, rows(1, 1), rows(1, 2), rows(1, 3))
    assert fake.gate is not None
    fake.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *tasks), GUARD)
    assert fake.batches == [1, 3]


async def test_a_call_that_fails_the_batch_fails_alone() -> None:
    fake = FakeModel()
    subject = batcher(fake)
    first = await hold_busy(fake, subject)
    bad = rows(1, 2)
    bad[0, 1] = np.nan
    inputs = [rows(1, 1), bad, rows(2, 3)]
    tasks = await queue(subject, *inputs)
    assert fake.gate is not None
    fake.gate.set()
    results: list[Any] = await asyncio.wait_for(
        asyncio.gather(first, *tasks, return_exceptions=True), GUARD
    )
    assert fake.batches == [1, 4, 1, 1, 2]  # the batch, then each call alone
    np.testing.assert_array_equal(results[1]["y"], expected(inputs[0]))
    assert isinstance(results[2], ServableError) and "NaN" in results[2].message
    np.testing.assert_array_equal(results[3]["y"], expected(inputs[2]))
    assert subject.stats.failed_batches == 1


async def test_a_cancelled_caller_leaves_the_others_their_results() -> None:
    fake = FakeModel()
    subject = batcher(fake)
    first = await hold_busy(fake, subject)
    inputs = [rows(1, seed) for seed in range(4)]
    tasks = await queue(subject, *inputs)
    tasks[1].cancel()  # gone while queued: not in the batch
    await asyncio.sleep(0)
    assert fake.gate is not None
    fake.gate.set()
    await asyncio.wait_for(asyncio.gather(first, tasks[0], tasks[2], tasks[3]), GUARD)
    assert fake.batches == [1, 3]
    # Gone while its batch runs: the batch goes on for the others.
    fake.started.clear()
    first = await hold_busy(fake, subject)
    tasks = await queue(subject, *inputs)
    release, fake.gate = fake.gate, asyncio.Event()  # the batch will wait on the new gate
    release.set()
    await asyncio.wait_for(first, GUARD)
    while len(fake.batches) < 4:
        await asyncio.sleep(0)
    assert fake.batches[-1] == 4
    tasks[0].cancel()
    await asyncio.sleep(0)
    fake.gate.set()
    results = await asyncio.wait_for(asyncio.gather(*tasks[1:]), GUARD)
    for x, result in zip(inputs[1:], results, strict=True):
        np.testing.assert_array_equal(result["y"], expected(x))
    assert tasks[0].cancelled()


async def test_calls_without_a_common_first_dimension_run_alone() -> None:
    assert signature({"x": np.zeros(()), "z": np.zeros((2,))}) is None
    assert signature({"x": np.zeros((2, 3)), "z": np.zeros((3,))}) is None
    assert signature({"x": np.zeros((2, 3)), "z": np.zeros((2,))}) is not None
    fake = FakeModel()
    subject = batcher(fake)
    first = await hold_busy(fake, subject)

    async def odd() -> Any:
        return await subject.submit({"x": rows(2, 1), "z": np.zeros((3,))}, ["n"])

    assert fake.gate is not None
    fake.gate.set()
    await asyncio.wait_for(asyncio.gather(first, odd()), GUARD)
    assert subject.queued == 0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("yes", "must be an object"),
        ({"max_batch_size": 0}, "max_batch_size must be a positive integer"),
        ({"max_batch_sizes": 4}, "unknown key 'max_batch_sizes'"),
        ({"max_batch_size": 4, "preferred_batch_size": [8]}, "from 1 to max_batch_size (4)"),
        ({"max_queue_delay_microseconds": -1}, "non-negative integer"),
        ({"max_concurrent_batches": True}, "max_concurrent_batches must be a positive integer"),
    ],
)
def test_config_errors_name_the_key(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match="dynamic_batching") as raised:
        DynamicBatchingConfig.from_json(value, "model_config_list[0].config.dynamic_batching")
    assert message in str(raised.value)


def test_config_defaults() -> None:
    assert DynamicBatchingConfig.from_json(None, "x") is None
    assert DynamicBatchingConfig.from_json(False, "x") is None
    assert DynamicBatchingConfig.from_json({}, "x") == DynamicBatchingConfig(16, (), 0, None)
    parsed = DynamicBatchingConfig.from_json(
        {"max_batch_size": 8, "preferred_batch_size": [8, 4, 4], "max_queue_delay_microseconds": 5},
        "x",
    )
    assert parsed == DynamicBatchingConfig(8, (4, 8), 5, None)
    assert parsed.with_concurrency(streams=4, nireq=2).max_concurrent_batches == 2
    assert parsed.with_concurrency(streams=0, nireq=2).max_concurrent_batches == 1
    fixed = DynamicBatchingConfig.from_json({"max_concurrent_batches": 3}, "x")
    assert fixed is not None and fixed.with_concurrency(streams=1, nireq=1) == fixed


async def test_after_a_batch_with_company_an_idle_call_waits_for_company() -> None:
    fake = FakeModel()
    subject = batcher(fake, max_batch_size=2, max_queue_delay_microseconds=HOUR_US)
    first = await hold_busy(fake, subject)
    tasks = await queue(subject, rows(1, 1), rows(1, 2))
    assert fake.gate is not None
    fake.gate.set()
    await asyncio.wait_for(asyncio.gather(first, *tasks), GUARD)
    assert fake.batches == [1, 2]
    # The model is idle, but the last batch had company: the next call queues for the delay...
    lonely = await queue(subject, rows(1, 3))
    assert not lonely[0].done()
    # ...and runs with the company that comes.
    company = await queue(subject, rows(1, 4))
    await asyncio.wait_for(asyncio.gather(*lonely, *company), GUARD)
    assert fake.batches == [1, 2, 2]
