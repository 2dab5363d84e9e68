"""Asyncio side of an engine process: start it, submit requests, stream their tokens, abort.

Events from the worker are read on the event loop through `add_reader` (no thread hop) and routed
to one `RequestStream` per request. A stream only buffers: when its consumer lags, deltas pile up
and the next read takes all of them at once, so a slow client never blocks the engine or other
requests. Commands go out through a small sender thread, because a large prompt written to a full
pipe would otherwise block the loop until the worker finishes its step.

The worker's death is noticed when its event pipe closes: every open stream fails at once with
`EngineDead`, and new submissions are refused with the same error, until the client's `Supervisor`
(servables.runtime.supervision) has started a new worker; the exit code or signal is read once the
process is reaped and goes into the log and the servable's status. Each worker has its own pipes,
sender thread and request streams, so nothing of a dead worker leaks into the next. Requests beyond
the engine's batch wait in it; `Admission` (servables.runtime.admission) bounds how many.

At DEBUG, each engine request's first tokens and its end are logged as they arrive, which is
the order the engine produced them in (what a client reads, and when, depends on its own
scheduling).

A grammar the engine could not compile fails its request with `GrammarNotCompiled` (a 400; the
worker rebuilt its pipeline in place, see servables/llm/engine/batching.py) and is remembered, a
bounded number of them, so that the servable refuses it at once next time (`grammar_failure`).
Requests the rebuild cut short fail retryably (503 with Retry-After).

Workers are started from the event-loop thread: Linux's parent-death signal, which kills a
worker whose frontend died (servables.llm.engine.lifetime), follows the thread that forked it.

One module, over 400 lines, for a reason: `RequestStream`, `_Worker` and `EngineClient` share one
piece of state (the open requests and the current worker) that a stream's close, a worker's event
and a worker's death all change; apart, they would reach into each other's private parts.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import os
import queue
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from multiprocessing.connection import Connection
from typing import Any

from servables.errors import (
    EngineDead,
    GrammarNotCompiled,
    InvalidRequest,
    ServableError,
    ServableLoadError,
    ServableNotReady,
)
from servables.llm.engine.messages import (
    Abort,
    AddRequest,
    EngineFailed,
    EngineMetrics,
    EngineSpec,
    LoadFailed,
    Ready,
    RequestFailed,
    SequenceDelta,
    Shutdown,
    StepOutputs,
    send_command,
)
from servables.runtime.admission import Admission
from servables.runtime.supervision import RestartPolicy, Supervisor, describe_exit

logger = logging.getLogger(__name__)

# How long a worker whose pipe closed may take to exit before it is killed.
REAP_TIMEOUT = 5.0
# Batch capacity of pipelines that serve one request at a time (LLMPipeline, VLMPipeline).
STATEFUL_CAPACITY = 1
ENGINE_DEFAULT_MAX_NUM_SEQS = 256
# Grammars the engine could not compile, remembered (least recently seen dropped first) so that
# a client repeating one is refused at once instead of costing a pipeline rebuild each time.
BAD_GRAMMARS = 1024
# Retry-After for a request cut short by a pipeline rebuild (the rebuild is already done).
REBUILD_RETRY_AFTER = 1.0


class RequestStream:
    """Deltas of the engine requests of one generation (one per choice), in arrival order."""

    def __init__(self, request_ids: list[int], client: EngineClient) -> None:
        self.request_ids = request_ids
        self.open_ids = set(request_ids)
        self.producing: set[int] = set()  # requests whose first tokens came (DEBUG log)
        self._client = client
        self._deltas: deque[SequenceDelta] = deque()
        self._error: ServableError | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _push(self, delta: SequenceDelta) -> None:
        self._deltas.append(delta)
        self._wake()

    def _fail(self, error: ServableError) -> None:
        self._error = error
        self._wake()

    async def next_batch(self) -> list[SequenceDelta]:
        """Every delta received since the last call; waits if there is none yet."""
        while not self._deltas:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        batch = list(self._deltas)
        self._deltas.clear()
        return batch

    def finish(self, request_id: int) -> None:
        """The consumer saw this request end (or cut it short): forget it, aborting if needed."""
        if request_id in self.open_ids:
            self.open_ids.discard(request_id)
            self._client._forget(request_id, abort=True)

    def close(self) -> None:
        """Abort every request of this generation that is still running."""
        self.closed = True
        for request_id in list(self.open_ids):
            self.finish(request_id)


class _Worker:
    """One engine process, its pipes and its sender thread; a restart makes a new one."""

    def __init__(
        self, process: subprocess.Popen[bytes], events: Connection, started: asyncio.Future[Ready]
    ) -> None:
        self.process = process
        self.events = events
        self.started = started
        self.outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.gone = False  # its pipe closed (it exited or is about to)

    def send_loop(self, connection: Connection) -> None:
        """Thread: write commands in order; None (the worker is gone) or Shutdown ends it."""
        try:
            while True:
                message = self.outbox.get()
                if message is None:
                    return
                try:
                    send_command(connection, message)
                except (OSError, ValueError):
                    return
                if isinstance(message, Shutdown):
                    return
        finally:
            connection.close()


def batch_capacity(spec: EngineSpec) -> int:
    """Requests the engine runs at once; more wait (see servables.runtime.admission)."""
    if spec.kind in ("LM_CB", "VLM_CB"):
        return int(spec.scheduler.get("max_num_seqs") or ENGINE_DEFAULT_MAX_NUM_SEQS)
    return STATEFUL_CAPACITY


class EngineClient:
    """See the module docstring."""

    def __init__(self, spec: EngineSpec, name: str) -> None:
        self.spec = spec
        self.name = name
        self.metrics = EngineMetrics()
        self.reported_at = 0.0  # wall-clock time of the latest metrics (epoch seconds)
        self.last_step_seconds = 0.0  # duration of the latest engine step (for trace spans)
        self.ready: Ready | None = None
        self.dead: str | None = "not started"  # why no engine takes requests now, if none does
        self.supervisor = Supervisor(f"engine process of {name}", self._spawn, RestartPolicy())
        self.admission = Admission(name, batch_capacity(spec))
        self._streams: dict[int, RequestStream] = {}
        self._ids = itertools.count(1)
        self._worker: _Worker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.step_listeners: list[Any] = []
        self._closing = False
        self._reapers: set[asyncio.Task[None]] = set()
        self._bad_grammars: OrderedDict[tuple[str, str], str] = OrderedDict()

    @property
    def alive(self) -> bool:
        return self.ready is not None and self.dead is None

    @property
    def active_requests(self) -> int:
        return len(self._streams)

    @property
    def queued_requests(self) -> int:
        """Requests waiting for a slot in the engine's batch (servables.runtime.admission)."""
        return self.admission.queued(len(self._streams))

    @property
    def pid(self) -> int | None:
        worker = self._worker
        return worker.process.pid if worker is not None and not worker.gone else None

    def retry_after(self) -> float | None:
        return self.supervisor.retry_after()

    async def start(self) -> Ready:
        """Start the first worker and wait until its pipeline is loaded; restarts follow on
        their own (see the supervisor)."""
        await self.supervisor.start()
        assert self.ready is not None
        return self.ready

    async def _spawn(self) -> Ready:
        """Start a worker and wait for its Ready.

        The worker is a fresh interpreter (`python -m servables.llm.engine.worker`) rather than a
        multiprocessing child, so it never re-imports the caller's main script.
        """
        loop = self._loop = asyncio.get_running_loop()
        commands_read, commands_write = multiprocessing.Pipe(duplex=False)
        events_read, events_write = multiprocessing.Pipe(duplex=False)
        handles = (commands_read.fileno(), events_write.fileno())
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "servables.llm.engine.worker",
                *map(str, handles),
                str(os.getpid()),
            ],
            pass_fds=handles,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # signals to the frontend's process group stay there
        )
        commands_read.close()
        events_write.close()
        worker = _Worker(process, events_read, loop.create_future())
        self._worker = worker
        loop.add_reader(events_read.fileno(), self._on_events, worker)
        worker.outbox.put(self.spec)
        threading.Thread(
            target=worker.send_loop,
            args=(commands_write,),
            name=f"engine-send-{self.name}",
            daemon=True,
        ).start()
        try:
            ready = await worker.started
        except BaseException:
            self._discard(worker)
            raise
        self.ready = ready
        layout = ready.kv_blocks
        self.metrics = EngineMetrics(kv_cache_bytes=layout.cache_bytes if layout else 0)
        self.reported_at = time.time()
        self.dead = None
        logger.info("engine of %s is running (pid %d)", self.name, process.pid)
        return ready

    def new_request_id(self) -> int:
        return next(self._ids)

    def grammar_failure(self, fields: dict[str, str]) -> str | None:
        """Why the engine could not compile this grammar (StructuredOutputConfig fields), if
        it has failed before; None if it has not."""
        ((kind, text),) = fields.items()
        key = (kind, text)
        message = self._bad_grammars.get(key)
        if message is not None:
            self._bad_grammars.move_to_end(key)
        return message

    def _remember_bad_grammar(self, key: tuple[str, str], message: str) -> None:
        self._bad_grammars[key] = message
        self._bad_grammars.move_to_end(key)
        while len(self._bad_grammars) > BAD_GRAMMARS:
            self._bad_grammars.popitem(last=False)

    def submit(self, requests: list[AddRequest]) -> RequestStream:
        """Send the requests of one generation; their deltas arrive on one stream."""
        worker = self._worker
        if self.dead is not None or worker is None:
            raise EngineDead(
                f"the engine of {self.name} is not running: {self.dead}",
                retry_after=self.retry_after(),
            )
        self.admission.check(len(self._streams))
        stream = RequestStream([request.request_id for request in requests], self)
        for request in requests:
            self._streams[request.request_id] = stream
            worker.outbox.put(request)
        return stream

    def _forget(self, request_id: int, abort: bool) -> None:
        """Stop routing a request; abort it in the engine if it may still run there."""
        worker = self._worker
        if (
            self._streams.pop(request_id, None) is not None
            and abort
            and self.dead is None
            and worker is not None
        ):
            worker.outbox.put(Abort(request_id))

    # ---------------------------------------------------------------------------- events

    def _on_events(self, worker: _Worker) -> None:
        try:
            while worker.events.poll():
                self._dispatch(worker, worker.events.recv())
        except (EOFError, OSError):
            self._on_exit(worker)

    def _dispatch(self, worker: _Worker, message: Any) -> None:
        if isinstance(message, StepOutputs):
            self.metrics = message.metrics
            self.reported_at = time.time()
            self.last_step_seconds = message.step_seconds
            streams = self._streams
            debug = logger.isEnabledFor(logging.DEBUG)
            for delta in message.deltas:
                stream = streams.get(delta.request_id)
                if stream is not None:
                    stream._push(delta)
                    if debug:
                        self._log_progress(stream, delta)
            for failure in message.failures:
                self._fail_request(failure)
            for listener in self.step_listeners:
                listener(message)
        elif isinstance(message, Ready):
            if not worker.started.done():
                worker.started.set_result(message)
        elif isinstance(message, LoadFailed):
            if not worker.started.done():
                worker.started.set_exception(ServableLoadError(message.message))
        elif isinstance(message, EngineFailed):
            self._die(message.message)

    def _log_progress(self, stream: RequestStream, delta: SequenceDelta) -> None:
        """An engine request's first tokens and its end, in the order the engine sent them:
        what the engine did when, whatever its clients read (the tests' evidence of batching
        and of one-at-a-time pipelines)."""
        request = delta.request_id
        if request not in stream.producing:
            stream.producing.add(request)
            logger.debug("%s: engine request %d: first tokens", self.name, request)
        if delta.finish_reason is not None:
            logger.debug(
                "%s: engine request %d: sequence %d finished (%s)",
                self.name,
                request,
                delta.index,
                delta.finish_reason,
            )

    def _fail_request(self, failure: RequestFailed) -> None:
        if failure.grammar is not None:
            self._remember_bad_grammar(failure.grammar, failure.message)
        stream = self._streams.pop(failure.request_id, None)
        if stream is None:
            return
        stream.open_ids.discard(failure.request_id)
        stream.close()
        if failure.grammar is not None:
            stream._fail(GrammarNotCompiled(failure.message))
        elif failure.client_error:
            stream._fail(InvalidRequest(failure.message))
        elif failure.retryable:
            stream._fail(ServableNotReady(failure.message, retry_after=REBUILD_RETRY_AFTER))
        else:
            stream._fail(ServableError(failure.message))

    def _on_exit(self, worker: _Worker) -> None:
        """A worker's event pipe closed: the process is gone, or going."""
        if worker.gone:
            return
        worker.gone = True
        worker.outbox.put(None)  # ends its sender thread
        if self._loop is not None:
            self._loop.remove_reader(worker.events.fileno())
        worker.events.close()
        if not worker.started.done():  # died while loading: the start fails
            worker.started.set_exception(
                ServableLoadError(f"the engine process of {self.name} exited during load")
            )
        elif worker is self._worker:
            self._die("the engine process exited")
        reaper = asyncio.get_running_loop().create_task(self._reap(worker))
        self._reapers.add(reaper)
        reaper.add_done_callback(self._reapers.discard)

    async def _reap(self, worker: _Worker) -> None:
        """Collect the exit status (killing a worker that closed its pipe but lingers), then
        tell the supervisor, unless the exit was ours."""
        process = worker.process
        try:
            await asyncio.to_thread(process.wait, REAP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)
        how = describe_exit(process.returncode)
        started = worker.started
        loaded = started.done() and not started.cancelled() and started.exception() is None
        if self._closing or not loaded:
            logger.debug("engine process %d of %s %s", process.pid, self.name, how)
            return
        if worker is self._worker:
            self.dead = f"the engine process {how}"
            self.supervisor.exited(how)

    def _discard(self, worker: _Worker) -> None:
        """Stop a worker that will not be used (its start failed or was cancelled)."""
        if worker.process.poll() is None:
            worker.process.kill()
        self._on_exit(worker)

    def _die(self, reason: str) -> None:
        if self.dead is not None:
            return
        self.dead = reason
        self.metrics = EngineMetrics()
        if self._closing:
            logger.info("engine of %s stopped", self.name)
        else:
            logger.error("engine of %s stopped: %s", self.name, reason)
        streams, self._streams = self._streams, {}
        error = EngineDead(
            f"the engine of {self.name} stopped: {reason}", retry_after=self.retry_after()
        )
        for stream in set(streams.values()):
            stream.open_ids.clear()
            stream.closed = True
            stream._fail(error)

    async def close(self, timeout: float = 10.0) -> None:
        """Stop restarting, then stop the worker: politely, then by force."""
        self._closing = True
        await self.supervisor.stop()
        worker = self._worker
        if worker is None:
            return
        if not worker.gone:
            worker.outbox.put(Shutdown())
        process = worker.process
        try:
            await asyncio.to_thread(process.wait, timeout)
        except subprocess.TimeoutExpired:
            logger.warning("engine of %s did not stop in %.0f s; killing it", self.name, timeout)
            process.kill()
            await asyncio.to_thread(process.wait)
        self._die("shut down")
        if not worker.gone:
            self._on_exit(worker)
        await asyncio.gather(*self._reapers, return_exceptions=True)
