"""PassBatcher: inline jobs queued within a loop pass run back to back, and only when it pays."""

from __future__ import annotations

import asyncio
import threading

import pytest

from servables.ov_model import pass_batch
from servables.ov_model.pass_batch import PassBatcher


class Recorder:
    """A job runner that notes, per job, whether it ran inside its caller's task (at once) or in
    the batcher's end-of-pass callback (queued), and fails jobs named "fail"."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, bool]] = []

    def __call__(self, job: str) -> str:
        self.ran.append((job, asyncio.current_task() is not None))
        if job == "fail":
            raise ValueError("this job fails")
        return job.upper()


def queueing(recorder: Recorder) -> PassBatcher[str, str]:
    batcher = PassBatcher(recorder)
    batcher.mean_size = pass_batch.QUEUE_ABOVE  # as after batches with company
    return batcher


async def test_jobs_of_one_pass_run_back_to_back_and_each_caller_gets_its_own_result() -> None:
    recorder = Recorder()
    batcher = queueing(recorder)
    jobs = ["a", "b", "fail", "c"]
    results = await asyncio.gather(*(batcher.submit(j) for j in jobs), return_exceptions=True)
    assert results[:2] == ["A", "B"] and results[3] == "C"
    assert isinstance(results[2], ValueError)  # the failure reaches its own caller only
    assert recorder.ran == [(job, False) for job in jobs]  # one end-of-pass callback, in order
    assert batcher.mean_size > pass_batch.QUEUE_ABOVE  # a batch of 4 raised the average


async def test_a_lone_caller_runs_at_once_and_every_probe_th_is_queued() -> None:
    recorder = Recorder()
    batcher = PassBatcher(recorder)  # no batches seen yet: requests come alone
    for index in range(pass_batch.PROBE_EVERY):
        assert await batcher.submit(str(index)) == str(index)
    queued = [job for job, at_once in recorder.ran if not at_once]
    assert queued == [str(pass_batch.PROBE_EVERY - 1)]  # the probe went through the queue
    assert len(recorder.ran) == pass_batch.PROBE_EVERY


async def test_batches_without_company_stop_the_queueing() -> None:
    recorder = Recorder()
    batcher = queueing(recorder)
    for index in range(10):  # one at a time: every batch has a single job
        await batcher.submit(str(index))
    assert batcher.mean_size < pass_batch.QUEUE_ABOVE
    queued = [job for job, at_once in recorder.ran if not at_once]
    assert 1 <= len(queued) < 10  # queued at first, then at once
    recorder.ran.clear()
    await batcher.submit("late")
    assert recorder.ran == [("late", True)]


async def test_a_caller_that_left_is_skipped() -> None:
    recorder = Recorder()
    batcher = queueing(recorder)
    leaving = asyncio.ensure_future(batcher.submit("gone"))
    staying = asyncio.ensure_future(batcher.submit("here"))
    await asyncio.sleep(0)  # both queued, the batch not yet run
    leaving.cancel()
    assert await staying == "HERE"
    assert recorder.ran == [("here", False)]
    with pytest.raises(asyncio.CancelledError):
        await leaving


def test_jobs_from_another_event_loop_run_at_once() -> None:
    recorder = Recorder()
    batcher = queueing(recorder)
    asyncio.run(batcher.submit("first"))  # the batcher now belongs to that loop
    done: list[str] = []
    thread = threading.Thread(target=lambda: done.append(asyncio.run(batcher.submit("other"))))
    thread.start()
    thread.join()
    assert done == ["OTHER"]
    assert recorder.ran == [("first", False), ("other", True)]
