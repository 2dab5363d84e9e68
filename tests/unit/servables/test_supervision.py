"""Supervisor: restarts with backoff, gives up past the budget, reports why and when to retry."""

from __future__ import annotations

import asyncio

import pytest

from servables.errors import ServableLoadError
from servables.runtime.supervision import (
    RestartPolicy,
    Supervisor,
    SupervisorState,
    describe_exit,
)

FAST = RestartPolicy(max_restarts=2, window=60.0, first_delay=0.001, max_delay=0.004)


class Spawner:
    """Counts starts; fails the next `failures` of them."""

    def __init__(self, failures: int = 0) -> None:
        self.starts = 0
        self.failures = failures

    async def __call__(self) -> None:
        self.starts += 1
        if self.failures:
            self.failures -= 1
            raise ServableLoadError("model files are gone")


async def settled(supervisor: Supervisor) -> None:
    for _ in range(1000):
        if supervisor.state is not SupervisorState.RESTARTING:
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the supervisor never settled")


def test_backoff_doubles_up_to_the_cap() -> None:
    policy = RestartPolicy(first_delay=0.5, max_delay=30.0)
    assert [policy.delay(n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (-9, "was killed by signal SIGKILL"),
        (-15, "was killed by signal SIGTERM"),
        (3, "exited with code 3"),
        (0, "exited with code 0"),
        (None, "closed its pipe without exiting"),
    ],
)
def test_exits_are_described_by_signal_name_or_code(code: int | None, text: str) -> None:
    assert describe_exit(code) == text


async def test_a_process_that_dies_is_restarted() -> None:
    spawn = Spawner()
    supervisor = Supervisor("engine process of m", spawn, FAST)
    await supervisor.start()
    assert supervisor.running and spawn.starts == 1
    supervisor.exited("was killed by signal SIGKILL")
    assert supervisor.state is SupervisorState.RESTARTING
    assert supervisor.reason == "the engine process of m was killed by signal SIGKILL"
    assert supervisor.retry_after() is not None
    await settled(supervisor)
    assert supervisor.running and supervisor.reason is None
    assert (spawn.starts, supervisor.restarts) == (2, 1)


async def test_it_gives_up_past_the_budget_and_says_why() -> None:
    spawn = Spawner()
    supervisor = Supervisor("engine process of m", spawn, FAST)
    await supervisor.start()
    for _ in range(FAST.max_restarts):
        supervisor.exited("exited with code 1")
        await settled(supervisor)
        assert supervisor.running
    assert supervisor.retry_after() is None  # one more death would not be restarted
    supervisor.exited("exited with code 1")
    await settled(supervisor)
    assert supervisor.state is SupervisorState.FAILED
    assert supervisor.reason is not None
    assert supervisor.reason.startswith("the engine process of m exited with code 1")
    assert "2 restart(s) in the last 60 s (the limit is 2)" in supervisor.reason
    assert spawn.starts == 1 + FAST.max_restarts
    supervisor.exited("exited with code 1")  # nothing runs any more: ignored
    assert supervisor.state is SupervisorState.FAILED


async def test_failed_restarts_are_retried_and_counted() -> None:
    spawn = Spawner()
    policy = RestartPolicy(max_restarts=5, window=60.0, first_delay=0.001, max_delay=0.002)
    supervisor = Supervisor("worker", spawn, policy)
    await supervisor.start()
    spawn.failures = 2
    supervisor.exited("was killed by signal SIGSEGV")
    await settled(supervisor)
    assert supervisor.running
    assert (spawn.starts, supervisor.restarts) == (4, 3)


async def test_restarts_that_keep_failing_end_in_failed_with_the_last_reason() -> None:
    spawn = Spawner()
    supervisor = Supervisor("worker", spawn, FAST)
    await supervisor.start()
    spawn.failures = 10
    supervisor.exited("exited with code 1")
    await settled(supervisor)
    assert supervisor.state is SupervisorState.FAILED
    assert supervisor.reason is not None
    assert "could not be restarted: model files are gone" in supervisor.reason


async def test_the_window_forgets_old_restarts() -> None:
    now = [0.0]
    spawn = Spawner()
    policy = RestartPolicy(max_restarts=1, window=10.0, first_delay=0.0, max_delay=0.0)
    supervisor = Supervisor("worker", spawn, policy, clock=lambda: now[0])
    await supervisor.start()
    supervisor.exited("exited with code 1")
    await settled(supervisor)
    now[0] = 11.0  # the first restart left the window
    supervisor.exited("exited with code 1")
    await settled(supervisor)
    assert supervisor.running and supervisor.restarts == 2


async def test_zero_restarts_means_down_at_the_first_death() -> None:
    supervisor = Supervisor("worker", Spawner(), RestartPolicy(max_restarts=0))
    await supervisor.start()
    supervisor.exited("was killed by signal SIGKILL")
    await settled(supervisor)
    assert supervisor.state is SupervisorState.FAILED


async def test_the_first_start_fails_to_the_caller() -> None:
    supervisor = Supervisor("worker", Spawner(failures=1), FAST)
    with pytest.raises(ServableLoadError):
        await supervisor.start()
    supervisor.exited("exited with code 1")  # not running: no restart
    assert supervisor.state is SupervisorState.STARTING


async def test_stop_cancels_a_pending_restart() -> None:
    spawn = Spawner()
    policy = RestartPolicy(first_delay=60.0, max_delay=60.0)
    supervisor = Supervisor("worker", spawn, policy)
    await supervisor.start()
    supervisor.exited("exited with code 1")
    retry_after = supervisor.retry_after()
    assert retry_after is not None and 59 < retry_after <= 60.1
    await supervisor.stop()
    assert supervisor.state is SupervisorState.STOPPED
    assert spawn.starts == 1
