"""Asyncio side of an engine process: start it, submit requests, stream their tokens, abort.

Events from the worker are read on the event loop through `add_reader` (no thread hop) and routed
to one `RequestStream` per request. A stream only buffers: when its consumer lags, deltas pile up
and the next read takes all of them at once, so a slow client never blocks the engine or other
requests. Commands go out through a small sender thread, because a large prompt written to a full
pipe would otherwise block the loop until the worker finishes its step.

The worker's death is noticed through its process sentinel: every open stream fails with
`EngineDead`, and new submissions are refused with the same error.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import multiprocessing
import queue
import subprocess
import sys
import threading
from collections import deque
from multiprocessing.connection import Connection
from typing import Any

from servables.engine.messages import (
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
from servables.errors import EngineDead, InvalidRequest, ServableError, ServableLoadError

logger = logging.getLogger(__name__)


class RequestStream:
    """Deltas of the engine requests of one generation (one per choice), in arrival order."""

    def __init__(self, request_ids: list[int], client: EngineClient) -> None:
        self.request_ids = request_ids
        self.open_ids = set(request_ids)
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


class EngineClient:
    """See the module docstring."""

    def __init__(self, spec: EngineSpec, name: str) -> None:
        self.spec = spec
        self.name = name
        self.metrics = EngineMetrics()
        self.last_step_seconds = 0.0  # duration of the latest engine step (for trace spans)
        self.ready: Ready | None = None
        self.dead: str | None = None
        self._streams: dict[int, RequestStream] = {}
        self._ids = itertools.count(1)
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._process: Any = None
        self._events: Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started: asyncio.Future[Ready] | None = None
        self.step_listeners: list[Any] = []
        self._closing = False

    @property
    def alive(self) -> bool:
        return self.ready is not None and self.dead is None

    @property
    def active_requests(self) -> int:
        return len(self._streams)

    async def start(self) -> Ready:
        """Start the worker and wait until its pipeline is loaded.

        The worker is a fresh interpreter (`python -m servables.engine.worker`) rather than a
        multiprocessing child, so it never re-imports the caller's main script.
        """
        commands_read, commands_write = multiprocessing.Pipe(duplex=False)
        events_read, events_write = multiprocessing.Pipe(duplex=False)
        handles = (commands_read.fileno(), events_write.fileno())
        self._process = subprocess.Popen(
            [sys.executable, "-m", "servables.engine.worker", *map(str, handles)],
            pass_fds=handles,
            stdin=subprocess.DEVNULL,
        )
        commands_read.close()
        events_write.close()
        self._events = events_read
        self._loop = asyncio.get_running_loop()
        self._started = self._loop.create_future()
        self._loop.add_reader(events_read.fileno(), self._on_events)
        self._outbox.put(self.spec)
        threading.Thread(
            target=self._send_loop,
            args=(commands_write,),
            name=f"engine-send-{self.name}",
            daemon=True,
        ).start()
        ready = await self._started
        self.ready = ready
        return ready

    def _send_loop(self, connection: Connection) -> None:
        while True:
            message = self._outbox.get()
            try:
                send_command(connection, message)
            except (OSError, ValueError):
                return
            if isinstance(message, Shutdown):
                connection.close()
                return

    def new_request_id(self) -> int:
        return next(self._ids)

    def submit(self, requests: list[AddRequest]) -> RequestStream:
        """Send the requests of one generation; their deltas arrive on one stream."""
        if self.dead is not None:
            raise EngineDead(f"the engine of {self.name} is not running: {self.dead}")
        stream = RequestStream([request.request_id for request in requests], self)
        for request in requests:
            self._streams[request.request_id] = stream
            self._outbox.put(request)
        return stream

    def _forget(self, request_id: int, abort: bool) -> None:
        """Stop routing a request; abort it in the engine if it may still run there."""
        if self._streams.pop(request_id, None) is not None and abort and self.dead is None:
            self._outbox.put(Abort(request_id))

    # ---------------------------------------------------------------------------- events

    def _on_events(self) -> None:
        events = self._events
        assert events is not None
        try:
            while events.poll():
                self._dispatch(events.recv())
        except (EOFError, OSError):
            self._on_exit()

    def _dispatch(self, message: Any) -> None:
        if isinstance(message, StepOutputs):
            self.metrics = message.metrics
            self.last_step_seconds = message.step_seconds
            streams = self._streams
            for delta in message.deltas:
                stream = streams.get(delta.request_id)
                if stream is not None:
                    stream._push(delta)
            for failure in message.failures:
                self._fail_request(failure)
            for listener in self.step_listeners:
                listener(message)
        elif isinstance(message, Ready):
            if self._started is not None and not self._started.done():
                self._started.set_result(message)
        elif isinstance(message, LoadFailed):
            self._die(message.message)
            if self._started is not None and not self._started.done():
                self._started.set_exception(ServableLoadError(message.message))
        elif isinstance(message, EngineFailed):
            self._die(message.message)

    def _fail_request(self, failure: RequestFailed) -> None:
        stream = self._streams.pop(failure.request_id, None)
        if stream is None:
            return
        stream.open_ids.discard(failure.request_id)
        stream.close()
        if failure.client_error:
            stream._fail(InvalidRequest(failure.message))
        else:
            stream._fail(ServableError(failure.message))

    def _on_exit(self) -> None:
        """The events pipe closed: the worker process is gone."""
        code = self._process.poll() if self._process is not None else None
        self._die(f"engine process exited (code {code})")
        if self._started is not None and not self._started.done():
            self._started.set_exception(
                ServableLoadError(f"the engine process of {self.name} exited during load")
            )

    def _die(self, reason: str) -> None:
        if self.dead is not None:
            return
        self.dead = reason
        if self._closing:
            logger.info("engine of %s stopped", self.name)
        else:
            logger.error("engine of %s stopped: %s", self.name, reason)
        loop = self._loop
        if loop is not None and self._events is not None:
            loop.remove_reader(self._events.fileno())
        streams, self._streams = self._streams, {}
        for stream in set(streams.values()):
            stream.open_ids.clear()
            stream.closed = True
            stream._fail(EngineDead(f"the engine of {self.name} stopped: {reason}"))

    async def close(self, timeout: float = 10.0) -> None:
        """Stop the worker: politely, then by force."""
        if self._process is None:
            return
        self._closing = True
        if self.dead is None:
            self._outbox.put(Shutdown())
        process = self._process
        try:
            await asyncio.to_thread(process.wait, timeout)
        except subprocess.TimeoutExpired:
            logger.warning("engine of %s did not stop in %.0f s; killing it", self.name, timeout)
            process.kill()
            await asyncio.to_thread(process.wait)
        self._die("shut down")
        if self._events is not None:
            self._events.close()
