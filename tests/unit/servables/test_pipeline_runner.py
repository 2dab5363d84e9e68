"""PipelineRunner: plain Python work on the runner's own thread, held back by threading.Events,
so admission, streaming, cancellation and shutdown are observed as they happen.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest

from servables.errors import ServableBusy, ServableNotReady
from servables.runtime.thread_runner import Finished, Job, PipelineRunner

WAIT = 5.0  # seconds a test waits for something that should take milliseconds


@pytest.fixture
async def runner() -> AsyncIterator[PipelineRunner]:
    runner = PipelineRunner("m", "test")
    runner.start()
    yield runner
    await runner.stop()


async def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.001)


class Gate:
    """Work that records its job, says it started, and waits to be released."""

    def __init__(self, result: Any = "done") -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.ended = threading.Event()
        self.jobs: list[Job[Any]] = []
        self.result = result

    def __call__(self, job: Job[Any]) -> Any:
        self.jobs.append(job)
        self.started.set()
        try:
            assert self.release.wait(WAIT)
            return self.result
        finally:
            self.ended.set()

    async def wait_started(self) -> None:
        await until(self.started.is_set)


async def test_events_then_the_result_in_order(runner: PipelineRunner) -> None:
    def work(job: Job[int]) -> str:
        for index in range(5):
            job.emit(index)
        return "done"

    items = [item async for item in runner.stream(work)]
    assert items == [0, 1, 2, 3, 4, Finished("done")]
    assert runner.stats.requests == 1 and runner.in_flight == 0


async def test_events_arrive_while_the_work_runs(runner: PipelineRunner) -> None:
    """The first event reaches the consumer while the work is still blocked: it streams."""
    release = threading.Event()

    def work(job: Job[str]) -> int:
        job.emit("early")
        assert release.wait(WAIT)
        job.emit("late")
        return 7

    stream = runner.stream(work)
    assert await stream.__anext__() == "early"
    assert runner.in_flight == 1
    release.set()
    assert [item async for item in stream] == ["late", Finished(7)]


async def test_run_returns_the_result(runner: PipelineRunner) -> None:
    assert await runner.run(lambda job: threading.current_thread().name) == "test-m_0"


async def test_the_works_exception_propagates(runner: PipelineRunner) -> None:
    def work(job: Job[Any]) -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await runner.run(work)
    assert runner.stats.failures == 1 and runner.stats.requests == 0
    assert runner.in_flight == 0
    assert await runner.run(lambda job: "next") == "next"  # the thread is free again


async def test_a_full_queue_refuses_with_retry_after(runner: PipelineRunner) -> None:
    runner.admission.max_queued = 1
    gate = Gate()
    running = asyncio.create_task(runner.run(gate))
    queued = asyncio.create_task(runner.run(gate))
    await gate.wait_started()
    await until(lambda: runner.in_flight == 2)
    assert runner.queued == 1 and len(gate.jobs) == 1  # one runs, one waits
    with pytest.raises(ServableBusy) as busy:
        await runner.run(gate)
    assert busy.value.retry_after == 1.0
    assert "1 requests are already waiting (the limit is 1)" in busy.value.message
    gate.release.set()
    assert await running == "done" and await queued == "done"
    assert runner.in_flight == 0 and runner.stats.requests == 2


async def test_closing_the_stream_cancels_the_job_but_holds_the_slot(
    runner: PipelineRunner,
) -> None:
    """A client that leaves frees nothing until the thread stops the work: the slot counts the
    work that really occupies the pipeline."""
    runner.admission.max_queued = 0
    gate = Gate()

    def work(job: Job[str]) -> str:
        job.emit("first")
        return str(gate(job))

    stream = runner.stream(work)
    assert isinstance(stream, AsyncGenerator)  # closed as a disconnected client's stream is
    assert await stream.__anext__() == "first"
    await stream.aclose()
    await until(lambda: len(gate.jobs) == 1)  # the thread reaches the gate after its emit
    (job,) = gate.jobs
    assert job.cancelled
    assert runner.stats.cancelled == 1
    assert runner.in_flight == 1  # the work has not returned yet
    with pytest.raises(ServableBusy):
        await runner.run(lambda job: None)
    gate.release.set()
    await until(lambda: runner.in_flight == 0)
    assert await runner.run(lambda job: "free") == "free"
    assert runner.stats.cancelled == 1 and runner.stats.requests == 1  # only the last one


async def test_cancelling_the_task_cancels_the_job(runner: PipelineRunner) -> None:
    gate = Gate()
    task = asyncio.create_task(runner.run(gate))
    await gate.wait_started()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (job,) = gate.jobs
    assert job.cancelled and runner.in_flight == 1
    gate.release.set()
    await until(lambda: runner.in_flight == 0)
    assert runner.stats.cancelled == 1 and runner.stats.failures == 0


async def test_a_job_cancelled_while_queued_never_runs(runner: PipelineRunner) -> None:
    first = Gate()
    ran: list[Job[Any]] = []
    running = asyncio.create_task(runner.run(first))
    await first.wait_started()
    waiting = asyncio.create_task(runner.run(ran.append))
    await until(lambda: runner.in_flight == 2)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert runner.in_flight == 2  # still in the executor's queue
    first.release.set()
    assert await running == "done"
    await until(lambda: runner.in_flight == 0)
    assert ran == []
    assert runner.stats.cancelled == 1 and runner.stats.requests == 1


async def test_the_work_stops_at_a_check_once_cancelled(runner: PipelineRunner) -> None:
    checks: list[int] = []

    def work(job: Job[int]) -> None:
        job.emit(0)
        while True:
            job.check()
            checks.append(1)
            time.sleep(0.001)

    stream = runner.stream(work)
    assert isinstance(stream, AsyncGenerator)
    assert await stream.__anext__() == 0
    await stream.aclose()
    await until(lambda: runner.in_flight == 0)  # JobCancelled ended the work
    assert checks


async def test_stats_count_steps_and_latencies(runner: PipelineRunner) -> None:
    def work(job: Job[Any]) -> str:
        for _ in range(3):
            time.sleep(0.002)
            job.step()
        return "ok"

    assert await runner.run(work) == "ok"
    stats = runner.stats
    assert stats.steps == 3 and stats.step_seconds.count == 3
    assert 0.005 <= stats.step_seconds.total < WAIT  # each step measured from the previous one
    assert stats.queue_seconds.count == 1 and stats.request_seconds.count == 1
    assert stats.request_seconds.total >= stats.step_seconds.total


async def test_stop_cancels_the_running_job_and_waits_for_it() -> None:
    runner = PipelineRunner("m", "test")
    runner.start()
    ended = threading.Event()

    def work(job: Job[Any]) -> None:
        try:
            while True:
                job.check()
                time.sleep(0.001)
        finally:
            time.sleep(0.05)  # stop() must wait for this too
            ended.set()

    task = asyncio.create_task(runner.run(work))
    await until(lambda: runner.in_flight == 1)
    await asyncio.sleep(0.01)
    await runner.stop()
    assert ended.is_set()
    # The client is still there: it is told to retry (503), not that it went away (499).
    with pytest.raises(ServableNotReady, match="unloaded while the request ran") as raised:
        await task
    assert raised.value.retry_after is not None
    assert runner.stats.cancelled == 1
    with pytest.raises(ServableNotReady, match="Model m is not loaded"):
        await runner.run(lambda job: None)


async def test_not_started_is_not_ready() -> None:
    with pytest.raises(ServableNotReady):
        await PipelineRunner("m", "test").run(lambda job: None)
