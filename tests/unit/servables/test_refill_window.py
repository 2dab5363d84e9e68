"""The batching loop's refill window (servables/llm/engine/refill.py): after a step that finished
requests it waits a little for their successors, stops as soon as they are in, and stops waiting
at all when the windows do not pay."""

from __future__ import annotations

import threading
import time
from multiprocessing import Pipe
from typing import Any

import pytest

from servables.llm.engine import refill
from servables.llm.engine.batching import ContinuousBatchingLoop
from servables.llm.engine.messages import AddRequest, Outbox, send_command
from servables.llm.engine.refill import RefillWindow


def test_the_window_is_a_share_of_the_step_and_bounded() -> None:
    window = RefillWindow()
    assert window.seconds(0, 0.080) == 0.0  # nothing finished: nobody to wait for
    assert window.seconds(1, 0.040) == pytest.approx(refill.STEP_FRACTION * 0.040)
    assert window.seconds(3, 10.0) == refill.MAX_SECONDS


def closed(window: RefillWindow) -> bool:
    return window.closed  # a call, so that mypy does not narrow the property between asserts


def test_the_window_closes_when_nobody_comes_and_reopens_on_trial() -> None:
    window = RefillWindow()
    for _ in range(refill.HISTORY // 2):
        window.waited(1)
    for _ in range(refill.HISTORY // 2):
        window.waited(0)
    assert not closed(window)  # half the windows paid
    window.waited(0)
    assert closed(window)
    skipped = [window.seconds(1, 0.05) for _ in range(refill.RETRY_AFTER - 1)]
    assert skipped == [0.0] * (refill.RETRY_AFTER - 1)
    assert window.seconds(1, 0.05) > 0  # a trial: the history starts over
    assert not closed(window)


class Recorder(ContinuousBatchingLoop):
    """The loop's command intake only: handled messages are recorded, not added to a pipeline."""

    def __init__(self, commands: Any) -> None:
        super().__init__(pipeline=None, commands=commands, events=None)  # type: ignore[arg-type]
        self.handled: list[Any] = []

    def handle(self, message: Any, outbox: Outbox) -> None:
        self.handled.append(message)


def add(request_id: int) -> AddRequest:
    return AddRequest(request_id, [1, 2, 3], None, {"max_new_tokens": 4})


def test_the_loop_waits_for_the_successors_and_no_longer() -> None:
    reader, writer = Pipe(duplex=False)
    loop = Recorder(reader)
    loop.refill_wait, loop.refill_expected = 5.0, 2

    def client() -> None:
        for request_id in (1, 2):
            time.sleep(0.02)
            send_command(writer, add(request_id))

    sender = threading.Thread(target=client)
    started = time.perf_counter()
    sender.start()
    assert loop.receive(Outbox(), block=False)
    waited = time.perf_counter() - started
    sender.join()
    assert [m.request_id for m in loop.handled] == [1, 2]
    assert waited < 2.5  # back as soon as both were in, far inside the 5 s window
    assert list(loop.refill.recent) == [True]
    assert loop.refill_wait == 0.0  # one window per finishing step


def test_without_a_window_the_loop_does_not_wait() -> None:
    reader, _writer = Pipe(duplex=False)
    loop = Recorder(reader)
    started = time.perf_counter()
    assert loop.receive(Outbox(), block=False)
    assert time.perf_counter() - started < 1.0
    assert loop.handled == [] and not loop.refill.recent


def test_a_window_nobody_used_is_remembered() -> None:
    reader, _writer = Pipe(duplex=False)
    loop = Recorder(reader)
    loop.refill_wait, loop.refill_expected = 0.02, 1
    started = time.perf_counter()
    assert loop.receive(Outbox(), block=False)
    assert time.perf_counter() - started >= 0.02
    assert list(loop.refill.recent) == [False]
