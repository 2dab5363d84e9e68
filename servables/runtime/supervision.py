"""Supervision of a servable's worker process: restart it when it dies, within a budget.

A servable whose work runs in a child process (an engine worker) gives a `Supervisor` the
coroutine that starts that process, and tells it when the process exits on its own (`exited`).
The supervisor starts a new one after an exponential backoff (0.5 s, 1 s, 2 s, ... at most 30 s)
and gives up, leaving the servable down with the reason, once `max_restarts` restarts have
been made within `window` seconds: a process that dies that often has a cause a restart will not
fix (a model that crashes the engine, memory that is not there). Meanwhile `retry_after()` says
how long a refused request should wait before trying again.

Nothing here knows what the process is. The LLM engine client (servables/llm/engine/client.py) is
one user; any servable with a worker process can be another: build a Supervisor around the function
that starts the process, call `exited()` when it dies, and expose the supervisor as the `supervisor`
attribute (`HasSupervisor`), so the server applies the operator's restart policy, reports the state
and counts restarts without knowing the servable.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import signal
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

logger = logging.getLogger(__name__)


class SupervisorState(enum.Enum):
    STARTING = "STARTING"  # the first start is under way
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"  # the process died; a new one is on its way
    FAILED = "FAILED"  # gave up restarting: down until the servable is reloaded
    STOPPED = "STOPPED"  # stopped on purpose


@dataclass(frozen=True)
class RestartPolicy:
    """At most `max_restarts` restarts within any `window` seconds (0: never restart)."""

    max_restarts: int = 5
    window: float = 300.0
    first_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, recent_restarts: int) -> float:
        """Backoff before the next restart, given the restarts already made in the window."""
        return float(min(self.max_delay, self.first_delay * 2**recent_restarts))


def describe_exit(returncode: int | None) -> str:
    """How a process ended, for logs and status: the signal by name, or the exit code."""
    if returncode is None:
        return "closed its pipe without exiting"
    if returncode < 0:
        try:
            return f"was killed by signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Supervisor:
    """See the module docstring."""

    def __init__(
        self,
        name: str,
        spawn: Callable[[], Awaitable[object]],
        policy: RestartPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name  # what the process is, for messages: "engine process of smollm2"
        self.policy = policy or RestartPolicy()
        self.state = SupervisorState.STARTING
        self.reason: str | None = None  # why the process is not running, while it is not
        self.restarts = 0  # restarts attempted, over the supervisor's life
        self.start_seconds = 0.0  # how long the last successful start took
        self._spawn = spawn
        self._clock = clock
        self._recent: deque[float] = deque()  # when the restarts of the window were attempted
        self._next_start = 0.0
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self.state is SupervisorState.RUNNING

    async def start(self) -> None:
        """The first start; its failure is the caller's (a load error), not retried here."""
        self.state = SupervisorState.STARTING
        started = self._clock()
        await self._spawn()
        self.start_seconds = self._clock() - started
        self.state = SupervisorState.RUNNING

    def exited(self, how: str) -> None:
        """The running process ended on its own; `how` says how (see describe_exit)."""
        if self.state is not SupervisorState.RUNNING:
            return
        self.state = SupervisorState.RESTARTING
        self.reason = f"the {self.name} {how}"
        self._next_start = self._clock() + self.policy.delay(self._restarts_in_window())
        self._task = asyncio.get_running_loop().create_task(self._restart())

    def _restarts_in_window(self) -> int:
        horizon = self._clock() - self.policy.window
        while self._recent and self._recent[0] < horizon:
            self._recent.popleft()
        return len(self._recent)

    def retry_after(self) -> float | None:
        """Seconds until the process should be back (None: not expected back on its own)."""
        if self.state is SupervisorState.RESTARTING:
            return max(0.0, self._next_start - self._clock()) + self.start_seconds
        if self.state is SupervisorState.RUNNING:  # it is dying right now: what would follow
            recent = self._restarts_in_window()
            if recent >= self.policy.max_restarts:
                return None
            return self.policy.delay(recent) + self.start_seconds
        return None

    async def _restart(self) -> None:
        while True:
            recent = self._restarts_in_window()
            if recent >= self.policy.max_restarts:
                self.state = SupervisorState.FAILED
                self.reason = (
                    f"{self.reason}; not restarted again: {recent} restart(s) in the last "
                    f"{self.policy.window:.0f} s (the limit is {self.policy.max_restarts})"
                )
                logger.error("%s is down for good: %s", self.name, self.reason)
                return
            delay = self.policy.delay(recent)
            self._next_start = self._clock() + delay
            logger.error(
                "%s; restarting it in %.1f s (restart %d of at most %d in %.0f s)",
                self.reason,
                delay,
                recent + 1,
                self.policy.max_restarts,
                self.policy.window,
            )
            await asyncio.sleep(delay)
            self._recent.append(self._clock())
            self.restarts += 1
            started = self._clock()
            try:
                await self._spawn()
            except Exception as error:  # whatever stopped the start; the next try may work
                message = getattr(error, "message", None) or str(error) or type(error).__name__
                self.reason = f"the {self.name} could not be restarted: {message}"
                continue
            self.start_seconds = self._clock() - started
            self.state = SupervisorState.RUNNING
            self.reason = None
            logger.info("%s restarted in %.1f s", self.name, self.start_seconds)
            return

    async def stop(self) -> None:
        """No more restarts; a restart under way is cancelled (and its process with it)."""
        self.state = SupervisorState.STOPPED
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                if not task.cancelled():  # our own caller is being cancelled
                    raise


@runtime_checkable
class HasSupervisor(Protocol):
    """A servable with a supervised worker process (what the server looks for)."""

    @property
    def supervisor(self) -> Supervisor: ...


@runtime_checkable
class HasMoreSupervisors(Protocol):
    """A servable with worker processes besides its main one (an LLM's LoRA adapter engines):
    the server gives them the same restart policy and counts their restarts."""

    def more_supervisors(self) -> list[Supervisor]: ...
