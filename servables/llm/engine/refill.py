"""How long the batching loop waits, after a step that finished requests, for their successors.

A client that sends its next request as soon as one ends (a chat turn, an agent's next call, a
closed-loop load generator) reaches the engine a few milliseconds after the step that finished
the last one. By then the loop has started the next step, so the new request waits that whole
step, tens of milliseconds under load, before its prefill even begins. An engine driven in
process adds it before the next step. Measured on SmolLM2 at 32 concurrent streams
(benchmarks/serving.py): time to first token 1.20-1.30x the in-process engine's, up to one
step (1.13-1.26x with the window, on a machine too noisy to say more).

So after a step that finished requests, while others are still running, the loop waits for new
requests a little before the next step: at most 0.3 of the last step's time and never over
30 ms, and no longer than it takes as many requests to arrive as finished. The wait costs the
running requests that long, so the window closes when it does not pay: once most recent windows
saw no request arrive (traffic whose arrivals have nothing to do with finishes), the loop stops
waiting, and tries again after a while.

Why 30 ms: timed inside the frontend and the engine at 32 streams, a finishing step's successors
were submitted 9-30 ms after the step's outputs left the engine (the outputs of all 32 streams
go out, the clients answer, the burst of new requests is templated and tokenized), so a 10 ms
window missed most of them, and each miss cost the successor a whole step, often a long prefill
step, before its own prefill. With 30 ms they arrived in 8-19 ms and made the next step. Two
servers, interleaved, 3 rounds: later requests' TTFT 0.86x (8 streams) and 0.89x (32 streams)
of the 10 ms window's, throughput 1.015x and 0.992x.
"""

from __future__ import annotations

from collections import deque

# The longest wait, as a share of the last step's time and in seconds.
STEP_FRACTION = 0.3
MAX_SECONDS = 0.030
# Windows remembered; the window closes when fewer than half of them saw a request arrive.
HISTORY = 16
# Finishing steps without a window before the next trial.
RETRY_AFTER = 64


class RefillWindow:
    """See the module docstring."""

    def __init__(self) -> None:
        self.recent: deque[bool] = deque(maxlen=HISTORY)  # whether each window saw an arrival
        self.skipped = 0

    def seconds(self, finished: int, step_seconds: float) -> float:
        """How long to wait for new requests, after a step that finished `finished`."""
        if finished <= 0:
            return 0.0
        if self.closed:
            self.skipped += 1
            if self.skipped < RETRY_AFTER:
                return 0.0
            self.skipped = 0
            self.recent.clear()  # on trial again
        return min(MAX_SECONDS, STEP_FRACTION * step_seconds)

    @property
    def closed(self) -> bool:
        return len(self.recent) == HISTORY and 2 * sum(self.recent) < HISTORY

    def waited(self, arrived: int) -> None:
        """A window ended with `arrived` new requests."""
        self.recent.append(arrived > 0)
