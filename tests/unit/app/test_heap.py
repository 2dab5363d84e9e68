"""heap.settle: the long-lived heap is frozen out of full collections, and settling again (after a
reload) still collects reference cycles among objects frozen before."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from graphrt.serving import heap


class Linked:
    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def unfrozen_afterwards() -> Iterator[None]:
    try:
        yield
    finally:
        gc.unfreeze()


def test_settle_freezes_and_settling_again_collects_frozen_cycles(
    unfrozen_afterwards: None,
) -> None:
    cycle = Linked()
    ref = weakref.ref(cycle)
    heap.settle()
    assert gc.get_freeze_count() > 0
    del cycle
    gc.collect()
    assert ref() is not None  # frozen: out of the collector's sight
    heap.settle()
    assert ref() is None
