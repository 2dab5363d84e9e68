"""What a little CPU work next to the engine costs the engine: the limit of a server on few cores.

The engine's step runs on every core in lockstep: its inference threads meet at a barrier after
each of the model's many small operations. A process that takes a core for a moment (a server
frontend writing a chunk, a load generator parsing one) stops one of those threads, and the
others spin at the next barrier until it is back, so the step loses more time than the other
process used. This measures that factor directly, with nothing of graphrt's server involved:

- the engine alone: openvino-genai's ContinuousBatchingPipeline in this process (benchmarks/
  serving.py's `Engine`, the server's scheduler settings), a closed loop of `--concurrency`
  requests;
- the same with a co-runner: another process that wakes every `--period-ms` and spins for
  `--busy-ms` (a frontend's per-chunk work, roughly), at each `--nice` value given.

Rounds alternate the two within seconds: each co-runner run is compared with the mean of the
engine-alone runs just before and just after it, so a machine whose speed drifts (shared hosts)
moves both alike; the table gives the median of the per-round ratios (a shared host needs many
rounds: single rounds move by +-15% there). "amplification" is the engine's
loss over the co-runner's share of the machine: 1 means the engine loses exactly the CPU the
co-runner took, more means each millisecond taken cost the engine several.

    python benchmarks/interference.py [--concurrency 32] [--period-ms 5] [--busy-ms 0.25]
        [--nice 0 10] [--rounds 6] [--max-tokens 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from serving import (  # benchmarks/ is not a package
    Engine,
    server_properties,
    server_scheduler,
    summarize,
)

CO_RUNNER = """
import os, sys, time
os.nice(int(sys.argv[3]))
period, busy = float(sys.argv[1]) / 1e3, float(sys.argv[2]) / 1e3
while True:
    started = time.perf_counter()
    while time.perf_counter() - started < busy:
        pass
    time.sleep(max(0.0, period - (time.perf_counter() - started)))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", type=Path, help="GGUF file or model dir (default: SmolLM2)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--period-ms", type=float, default=5.0)
    parser.add_argument("--busy-ms", type=float, default=0.25)
    parser.add_argument("--nice", type=int, nargs="+", default=[0, 10])
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    model = args.model
    if model is None:
        from graphrt.serving.default_model import default_model_path

        model = default_model_path()
    engine = Engine(model, server_scheduler(), "CPU", server_properties("CPU"))
    engine.run(1, 8, 8)  # warm-up
    requests = max(2 * args.concurrency, 8)
    share = args.busy_ms / args.period_ms / (os.cpu_count() or 1)
    print(
        f"engine at concurrency {args.concurrency}, {args.max_tokens} tokens; co-runner busy "
        f"{args.busy_ms} ms every {args.period_ms} ms ({100 * share:.1f}% of the machine)",
        flush=True,
    )

    def rate(nice: int | None) -> float:
        co_runner = None
        if nice is not None:
            command = [sys.executable, "-c", CO_RUNNER, str(args.period_ms), str(args.busy_ms)]
            co_runner = subprocess.Popen([*command, str(nice)])
        try:
            time.sleep(0.3)
            results, seconds = engine.run(args.concurrency, requests, args.max_tokens)
            return summarize(results, seconds, args.concurrency, args.max_tokens).output_throughput
        finally:
            if co_runner is not None:
                co_runner.kill()
                co_runner.wait()

    ratios: dict[int, list[float]] = {nice: [] for nice in args.nice}
    before = rate(None)
    for round_index in range(args.rounds):
        shared = {nice: rate(nice) for nice in args.nice}
        after = rate(None)
        alone = (before + after) / 2
        line = f"round {round_index + 1}: alone {before:.1f} / {after:.1f} tok/s"
        for nice, value in shared.items():
            ratios[nice].append(value / alone)
            line += f", co-runner at nice {nice}: {ratios[nice][-1]:.3f}"
        print(line, flush=True)
        before = after
    print(f"{'co-runner nice':>14} {'engine / alone':>15} {'amplification':>14}")
    for nice, values in ratios.items():
        median = statistics.median(values)
        print(f"{nice:>14} {median:>15.3f} {(1 - median) / share:>14.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
