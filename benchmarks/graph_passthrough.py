"""Packets per second through chains of PassThroughCalculators, end to end, next to MediaPipe.

Feeds N integer packets into `in`, through a chain of K PassThroughCalculators, and counts them
in an output-stream callback, timing start_run .. wait_until_done like MediaPipe's own
measurement. Two graphrt drivers: the synchronous `CalculatorGraph` (producer thread + graph
thread, as MediaPipe) and the asyncio `Graph` (producer on the loop). In the same run, the same
chains go through MediaPipe 0.10.21's C++ runtime driven from Python the same way as the
synchronous driver (benchmarks/mediapipe_passthrough.py, in a venv of its own: see
benchmarks/mediapipe_venv.sh), and the table shows each driver's rate over MediaPipe's.

Every repeat runs all drivers of a chain back to back, so a ratio compares runs a few seconds
apart (the machine may be shared); the table shows the best rate of each and the median of the
per-repeat ratios, and the CPU time per packet (all threads of the process; steadier than the
rate when other processes compete for the cores).

    python benchmarks/graph_passthrough.py [-n 100000] [--chains 1 10] [--repeats 3]
        [--mediapipe-python PATH | --no-mediapipe]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import calculators.core.pass_through  # noqa: F401  (registers PassThroughCalculator)
from graphruntime import CalculatorGraph, Graph, Packet, ValidatedGraph

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The same chains and CPU clock as the MediaPipe run (benchmarks/ is not a package; the sibling
# imports only the standard library at its top, so it runs in MediaPipe's venv too).
from mediapipe_passthrough import chain_config, cpu_seconds

HERE = Path(__file__).resolve().parent
DEFAULT_MEDIAPIPE_PYTHON = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "graphrt-bench"
    / "mediapipe-venv"
    / "bin"
    / "python"
)


def run_sync(graph: ValidatedGraph, count: int) -> float:
    received = 0
    last = -1

    def observe(_: str, packet: Packet[int]) -> None:
        nonlocal received, last
        received += 1
        last = packet._timestamp

    runner = CalculatorGraph(graph)
    runner.observe_output_stream("out", observe)
    start = time.perf_counter()
    runner.start_run()
    add = runner.add_packet_to_input_stream
    for i in range(count):
        add("in", Packet(i, i))
    runner.close_all_packet_sources()
    runner.wait_until_done()
    elapsed = time.perf_counter() - start
    assert received == count and last == count - 1, (received, last)
    return count / elapsed


def run_async(graph: ValidatedGraph, count: int) -> float:
    received = 0

    def observe(_: str, packet: Packet[int]) -> None:
        nonlocal received
        received += 1

    async def main() -> float:
        runner = Graph(graph)
        runner.observe_output_stream("out", observe)
        start = time.perf_counter()
        await runner.start_run()
        add = runner.add_packet
        for i in range(count):
            await add("in", Packet(i, i))
        runner.close_all_packet_sources()
        await runner.wait_until_done()
        return count / (time.perf_counter() - start)

    rate = asyncio.run(main())
    assert received == count
    return rate


def run_mediapipe(
    python: Path, length: int, count: int, max_queue_size: int
) -> tuple[float, float]:
    """One MediaPipe measurement in its own interpreter (see mediapipe_passthrough.py)."""
    output = subprocess.run(
        [
            str(python),
            str(HERE / "mediapipe_passthrough.py"),
            "--chain",
            str(length),
            "-n",
            str(count),
            "--max-queue-size",
            str(max_queue_size),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    return float(result["packets_per_second"]), float(result["cpu_per_packet"])


DRIVERS: dict[str, Callable[[ValidatedGraph, int], float]] = {
    "sync": run_sync,
    "async": run_async,
}


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", "--packets", type=int, default=100_000)
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--drivers", nargs="+", default=list(DRIVERS), choices=list(DRIVERS))
    parser.add_argument("--max-queue-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--mediapipe-python",
        type=Path,
        default=DEFAULT_MEDIAPIPE_PYTHON,
        help="python of a venv with mediapipe==0.10.21 (benchmarks/mediapipe_venv.sh makes one)",
    )
    parser.add_argument("--no-mediapipe", action="store_true", help="graphrt only")
    args = parser.parse_args()
    mediapipe = None if args.no_mediapipe else args.mediapipe_python
    if mediapipe is not None and not mediapipe.exists():
        parser.error(
            f"no MediaPipe venv at {mediapipe}: run `bash benchmarks/mediapipe_venv.sh`, pass "
            "--mediapipe-python, or --no-mediapipe"
        )

    print(f"load average before: {load_average()} (1/5/15 min)")
    header = (
        f"{'chain':>5} {'driver':>9} {'best pkt/s':>11} {'median':>9} {'us/pkt':>7} "
        f"{'CPU us/pkt':>10}"
    )
    print(header + (f" {'vs MediaPipe':>13}" if mediapipe else ""))
    for length in args.chains:
        graph = ValidatedGraph.from_config(chain_config(length, args.max_queue_size))
        rates: dict[str, list[float]] = {name: [] for name in args.drivers}
        cpu: dict[str, list[float]] = {name: [] for name in [*args.drivers, "MediaPipe"]}
        reference: list[float] = []
        for _ in range(args.repeats):
            if mediapipe is not None:
                rate, per_packet = run_mediapipe(
                    mediapipe, length, args.packets, args.max_queue_size
                )
                reference.append(rate)
                cpu["MediaPipe"].append(per_packet)
            for driver in args.drivers:
                started = cpu_seconds()
                rates[driver].append(DRIVERS[driver](graph, args.packets))
                cpu[driver].append((cpu_seconds() - started) / args.packets)
        rows = [(name, values) for name, values in rates.items()]
        if reference:
            rows.append(("MediaPipe", reference))
        for name, values in rows:
            best = max(values)
            line = (
                f"{length:>5} {name:>9} {best:>11,.0f} {statistics.median(values):>9,.0f} "
                f"{1e6 / best:>7.1f} {1e6 * min(cpu[name]):>10.1f}"
            )
            if reference and name != "MediaPipe":
                ratio = statistics.median(v / r for v, r in zip(values, reference, strict=True))
                line += f" {ratio:>12.2f}x"
            print(line, flush=True)
    print(f"load average after: {load_average()} (1/5/15 min)")
    if reference:
        print("vs MediaPipe: median over repeats of graphrt's rate / MediaPipe's in that repeat")
    print("CPU us/pkt: the lowest over repeats of the process's CPU time (all threads) per packet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
