"""A heavy pipeline run off the event loop, one request at a time, behind a bounded queue.

openvino-genai's image generation, speech-to-text and text-to-speech pipelines take seconds of
every core per request and release the GIL inside `generate()`, so they run in the server's
process on a thread of their own (unlike the LLM engine, whose `step()` holds the GIL and lives
in a worker process). One thread per pipeline: a pipeline instance runs one request at a time
(two at once on one instance corrupt each other in openvino-genai 2026.4, and its Python API has
no `clone()`; OVMS runs text-to-image requests on clones in parallel, which on a CPU only share
the same cores, and serialises inpainting and LoRA requests as this does).

Requests beyond the one running wait in a queue bounded by `admission` (the server sets
`max_queued` from `--max_queued_requests`); past it they are refused with ServableBusy (503 with
Retry-After). A request's slot is held until its thread is free again, not until its client
left, so the bound counts the work that is really waiting.

The request's work gets a `Job`. It checks `job.cancelled` wherever the pipeline lets it stop
(an image's step callback, the transcription streamer): a request whose client went away, or
whose coroutine was cancelled, is stopped at the next step and frees the thread. It reports
progress with `job.step()` (per-step latency, for /metrics) and sends events with `job.emit()`
(partial images, transcript deltas), which the request's coroutine receives as they happen.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from servables.errors import RequestCancelled, ServableNotReady
from servables.runtime.admission import Admission
from servables.runtime.histogram import LATENCY_BUCKETS, Histogram

logger = logging.getLogger(__name__)

E = TypeVar("E")  # what a job emits while it runs
R = TypeVar("R")  # what it returns
STEP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
REQUEST_BUCKETS = (*LATENCY_BUCKETS, 60.0, 120.0, 300.0)
STEP_FLUSH_SECONDS = 0.25


@dataclass
class PipelineStats:
    """What a pipeline did, for /metrics (read on the event loop's thread, written there too)."""

    requests: int = 0  # finished with a result
    failures: int = 0
    cancelled: int = 0
    steps: int = 0
    queue_seconds: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    request_seconds: Histogram = field(default_factory=lambda: Histogram(REQUEST_BUCKETS))
    step_seconds: Histogram = field(default_factory=lambda: Histogram(STEP_BUCKETS))

    def add_steps(self, durations: list[float]) -> None:
        self.steps += len(durations)
        for seconds in durations:
            self.step_seconds.observe(seconds)


class JobCancelled(RequestCancelled):
    """Raised inside a job's work by `Job.check()` once the job is cancelled."""


@dataclass(frozen=True)
class Finished(Generic[R]):
    """The last item `PipelineRunner.stream` yields: the work's result."""

    result: R


class Job(Generic[E]):
    """What a request's work sees on the pipeline's thread; see the module docstring."""

    def __init__(self, loop: asyncio.AbstractEventLoop, events: asyncio.Queue[Any]) -> None:
        self._loop = loop
        self._events = events
        self._cancelled = threading.Event()
        self._stats: PipelineStats | None = None
        self._last_step = self._last_flush = 0.0
        self._steps: list[float] = []  # step durations not yet handed to the stats

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        self._cancelled.set()

    def check(self) -> None:
        """Raise JobCancelled if the job was cancelled (between steps of the work)."""
        if self._cancelled.is_set():
            raise JobCancelled("The request was cancelled")

    def emit(self, event: E) -> None:
        """Hand `event` to the request's coroutine (thread-safe; never blocks the pipeline)."""
        self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    def step(self) -> None:
        """One step of the pipeline is done (a denoising step, a piece of text): its latency.
        Handed to the stats in batches, a few times a second: a Whisper request has a step
        per word, and waking the event loop for each cost ~0.5 ms of a 50 ms request."""
        now = time.perf_counter()
        self._steps.append(now - self._last_step)
        self._last_step = now
        if now - self._last_flush >= STEP_FLUSH_SECONDS:
            self.flush_steps()

    def flush_steps(self) -> None:
        steps, self._steps = self._steps, []
        self._last_flush = time.perf_counter()
        if steps and self._stats is not None:
            self._loop.call_soon_threadsafe(self._stats.add_steps, steps)

    def _started(self, stats: PipelineStats) -> None:
        self._stats = stats
        self._last_step = self._last_flush = time.perf_counter()


_END = object()  # queued after the work ended, whatever its outcome


class PipelineRunner:
    """Runs jobs on the pipeline's own thread; see the module docstring."""

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind
        self.stats = PipelineStats()
        self.admission = Admission(name, capacity=1)
        self.in_flight = 0  # admitted jobs whose work has not ended (the one running included)
        self._jobs: set[Job[Any]] = set()
        self._executor: ThreadPoolExecutor | None = None
        self._stopping = False  # stop() cancelled the jobs, not their clients

    def start(self) -> None:
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"{self.kind}-{self.name}")

    async def stop(self) -> None:
        """Cancel every job and wait for the running one to reach a step where it stops."""
        executor, self._executor = self._executor, None
        self._stopping = True
        for job in self._jobs:
            job.cancel()
        if executor is not None:
            await asyncio.to_thread(executor.shutdown, wait=True, cancel_futures=False)

    @property
    def queued(self) -> int:
        return self.admission.queued(self.in_flight)

    def admit(self) -> None:
        """Raise ServableBusy now if a new job would be refused: before a request's own
        preparation (decoding an upload), not only when its job is submitted."""
        self.admission.check(self.in_flight)

    async def run(self, work: Callable[[Job[Any]], R]) -> R:
        """Run `work` and return its result (for work that emits nothing)."""
        async for item in self.stream(work):
            if isinstance(item, Finished):
                result: R = item.result
                return result
        raise AssertionError("a job's stream ends with its result")  # pragma: no cover

    async def stream(
        self, work: Callable[[Job[E]], R], *, admitted: bool = False
    ) -> AsyncGenerator[E | Finished[R], None]:
        """The events `work` emits as it runs, then `Finished(result)`; the work's exception
        is raised in its place. Leaving the iteration early (a disconnect, a cancelled
        request) cancels the job; its slot frees once the thread has stopped it. `admitted`:
        the request was admitted before (one request of several jobs, a spoken answer's
        sentences): a full queue does not refuse it halfway."""
        executor = self._executor
        if executor is None:
            raise ServableNotReady(f"Model {self.name} is not loaded")
        if not admitted:
            self.admission.check(self.in_flight)
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Any] = asyncio.Queue()
        job: Job[E] = Job(loop, events)
        arrived = time.perf_counter()
        stats = self.stats

        def run_on_thread() -> R:
            loop.call_soon_threadsafe(stats.queue_seconds.observe, time.perf_counter() - arrived)
            job.check()
            job._started(stats)
            try:
                return work(job)
            finally:
                job.flush_steps()  # before the job's end is queued: its steps count by then

        self.in_flight += 1
        self._jobs.add(job)
        future = loop.run_in_executor(executor, run_on_thread)

        def ended(_: asyncio.Future[R]) -> None:
            self.in_flight -= 1
            self._jobs.discard(job)
            events.put_nowait(_END)

        future.add_done_callback(ended)
        try:
            while (item := await events.get()) is not _END:
                yield item
            try:
                result = future.result()
            except JobCancelled as error:
                stats.cancelled += 1
                if self._stopping:  # the client is still there: a retry may find a server
                    raise ServableNotReady(
                        f"Model {self.name} was unloaded while the request ran; retry",
                        retry_after=1.0,
                    ) from error
                raise
            except BaseException:
                stats.failures += 1
                raise
            stats.requests += 1
            stats.request_seconds.observe(time.perf_counter() - arrived)
            yield Finished(result)
        finally:
            if not future.done():
                job.cancel()
                stats.cancelled += 1
                future.add_done_callback(_retrieve)


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Consume the outcome of a job nobody waits for any more (no 'never retrieved' warning)."""
    if not future.cancelled() and future.exception() is not None:
        logger.debug("abandoned job ended with %r", future.exception())
