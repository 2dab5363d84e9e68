"""Back-pressure: a bound on the requests waiting for a servable's engine.

An engine runs at most `capacity` requests at once (an LLM engine: `max_num_seqs`; a pipeline
that serves one request at a time: 1). Requests admitted beyond that wait inside the engine for a
free slot; they are the *queued* requests:

    queued = max(0, requests in flight - capacity)

where a request is in flight from the moment it is handed to the engine until it ends (finished,
failed or aborted), and a generation with `n` choices counts as `n` requests (the engine runs
each choice as a request of its own). A new request is refused with ServableBusy (503 with
Retry-After) when, at its arrival, the batch is full and `max_queued` requests already wait; so
a request is never refused by an engine with a free slot, and `max_queued` 0 means "never wait".
None: no bound.

The count is the frontend's own, so it is exact at the instant of the decision and never lags
behind the engine's reports.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from servables.errors import ServableBusy

# Seconds a refused client is told to wait: slots free as requests finish, typically sooner.
BUSY_RETRY_AFTER = 1.0
DEFAULT_MAX_QUEUED = 1024


@dataclass
class Admission:
    """See the module docstring."""

    name: str
    capacity: int
    max_queued: int | None = DEFAULT_MAX_QUEUED

    def queued(self, in_flight: int) -> int:
        return max(0, in_flight - self.capacity)

    def check(self, in_flight: int) -> None:
        """Raise ServableBusy if a new request may not join `in_flight` ones."""
        full = in_flight >= self.capacity
        if full and self.max_queued is not None and self.queued(in_flight) >= self.max_queued:
            raise ServableBusy(
                f"Model {self.name} is busy: {self.queued(in_flight)} requests are already "
                f"waiting (the limit is {self.max_queued}); retry later",
                retry_after=BUSY_RETRY_AFTER,
            )


@dataclass
class CountedAdmission(Admission):
    """An Admission that counts its own requests in flight, for servables without an engine
    process (embeddings, rerank): `with admission.request():` around a request's work."""

    in_flight: int = 0

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        self.check(self.in_flight)
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


@runtime_checkable
class HasAdmission(Protocol):
    """A servable whose queue the server bounds (what the server looks for)."""

    @property
    def admission(self) -> Admission: ...
