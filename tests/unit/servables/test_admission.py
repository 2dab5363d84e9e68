"""Admission: a request is refused only when the queue beyond the engine's batch is full."""

from __future__ import annotations

import pytest

from servables.errors import ServableBusy
from servables.runtime.admission import Admission


def test_queued_counts_requests_beyond_the_batch() -> None:
    admission = Admission("m", capacity=4, max_queued=2)
    assert [admission.queued(n) for n in (0, 3, 4, 5, 9)] == [0, 0, 0, 1, 5]


def test_refused_once_the_queue_is_full() -> None:
    admission = Admission("m", capacity=2, max_queued=1)
    for in_flight in (0, 1, 2):  # a free slot, or a queue with room
        admission.check(in_flight)
    with pytest.raises(ServableBusy) as refused:
        admission.check(3)
    assert refused.value.retry_after == 1.0
    assert "1 requests are already waiting (the limit is 1)" in refused.value.message


def test_zero_refuses_as_soon_as_the_batch_is_full() -> None:
    admission = Admission("m", capacity=1, max_queued=0)
    admission.check(0)
    with pytest.raises(ServableBusy):
        admission.check(1)


def test_no_bound() -> None:
    Admission("m", capacity=1, max_queued=None).check(10_000)
