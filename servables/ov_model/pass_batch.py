"""A small model's inline inferences, run back to back at the end of an event-loop pass.

A tiny model's inference on the event loop's thread costs ~20 us when run over and over, but
~80 us between requests: each request's interpreter work (HTTP or gRPC, JSON, checks) evicts
OpenVINO's code and the model's weights from the core's caches, and each inference evicts the
interpreter's. So requests that reach their inference in the same pass of the loop are queued,
and one callback at the end of that pass runs them one after the other; each caller then gets
its own result (or error) through a future. Measured with benchmarks/kserve_wrk.py (REST, 16
connections, 2 cores): ~35 us of CPU per inference instead of ~80, and 60-70% more requests per
second. gRPC gains nothing: grpc.aio hands the loop one call per pass, so its batches are single.

Queueing costs two more loop passes per request (~35 us of CPU on these machines), which pays
only when requests have company. So the batcher keeps a moving average of the batches it ran and
queues only while that average says requests come together; otherwise requests run at once, and
every PROBE_EVERY-th one is queued anyway to notice when company comes back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Generic, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")

# Batches with company, on average, before requests are queued (1.0: every batch alone).
QUEUE_ABOVE = 1.5
# Weight of the newest batch in the moving average.
SMOOTHING = 0.25
# While requests run at once, one in this many is queued to measure the company it gets.
PROBE_EVERY = 32


class PassBatcher(Generic[Job, Result]):
    """Runs `run(job)` for the jobs of one event loop (see the module docstring).

    `run` is synchronous and may raise; the error goes to that job's caller only. Jobs from
    another event loop than the one the batcher first queued for run at once.
    """

    def __init__(self, run: Callable[[Job], Result]) -> None:
        self._run = run
        self._queue: list[tuple[Job, asyncio.Future[Result]]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self.mean_size = 1.0
        self._unqueued = 0

    async def submit(self, job: Job) -> Result:
        loop = asyncio.get_running_loop()
        if not self._should_queue(loop):
            return self._run(job)
        future: asyncio.Future[Result] = loop.create_future()
        if not self._queue:
            loop.call_soon(self._run_queue)
        self._queue.append((job, future))
        return await future

    def _should_queue(self, loop: asyncio.AbstractEventLoop) -> bool:
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            return False
        if self._queue or self.mean_size >= QUEUE_ABOVE:
            return True  # a batch is forming: join it
        self._unqueued += 1
        if self._unqueued < PROBE_EVERY:
            return False
        self._unqueued = 0
        return True

    def _run_queue(self) -> None:
        queue, self._queue = self._queue, []
        size = 0
        for job, future in queue:
            if future.cancelled():  # the caller left (a client disconnected)
                continue
            size += 1
            try:
                result = self._run(job)
            except Exception as error:
                future.set_exception(error)
            else:
                future.set_result(result)
        if size:
            self.mean_size += SMOOTHING * (size - self.mean_size)
