"""Histograms kept by servables as plain numbers, read by the server's metrics collectors.

Servables count what they do without knowing Prometheus (servables never import the server); the
collectors in graphrt/observability turn these into metric families when Prometheus scrapes.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, field
from itertools import accumulate

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


@dataclass
class Histogram:
    """Cumulative bucket counts (no Prometheus here)."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        for index, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[index] += 1
        self.total += value
        self.count += 1


class Tally:
    """Counts per bucket for a value observed often: one bisect, no loop over the bounds.

    `counts[i]` holds the values at most `bounds[i]` (and above the bound before it); the last
    entry holds those above every bound. `cumulative()` gives what an exposition needs.
    """

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # le: value <= bound
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[int]:
        """Values at most each bound, then all of them (+Inf)."""
        return list(accumulate(self.counts))
