"""The MediaPipe side of graph_passthrough.py: the same chains through MediaPipe's C++ runtime.

Runs in a virtualenv of its own with `mediapipe==0.10.21` (the last wheel with graph bindings),
because that wheel needs protobuf < 5 and numpy < 2 while graphrt needs protobuf 6: it imports
only mediapipe, and graph_passthrough.py starts it with that venv's interpreter and reads one JSON
line per measurement from its output. Create the venv with benchmarks/mediapipe_venv.sh.

The measurement is the one graph_passthrough.py makes with graphrt's synchronous CalculatorGraph:
start_run, add N int packets from this thread, close the sources, wait_until_done, with a Python
observer on the output stream counting packets.

    <mediapipe venv>/bin/python benchmarks/mediapipe_passthrough.py --chain 10 [-n 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def chain_config(length: int, max_queue_size: int) -> str:
    lines = ['input_stream: "in"', 'output_stream: "out"', f"max_queue_size: {max_queue_size}"]
    for i in range(length):
        source = "in" if i == 0 else f"s{i}"
        target = "out" if i == length - 1 else f"s{i + 1}"
        lines.append(
            f'node {{ calculator: "PassThroughCalculator" input_stream: "{source}" '
            f'output_stream: "{target}" }}'
        )
    return "\n".join(lines)


def cpu_seconds() -> float:
    """CPU time of this process, every thread (MediaPipe's workers included)."""
    times = os.times()
    return times.user + times.system


def run(length: int, count: int, max_queue_size: int) -> tuple[float, float]:
    # Not installed next to graphrt (see the module docstring), so mypy cannot see them.
    from mediapipe.python import (  # type: ignore[import-not-found,unused-ignore]
        packet_creator,
    )
    from mediapipe.python._framework_bindings import (  # type: ignore[import-not-found,unused-ignore]
        calculator_graph,
    )

    graph = calculator_graph.CalculatorGraph(graph_config=chain_config(length, max_queue_size))
    received = 0

    def observe(_: str, packet: Any) -> None:
        nonlocal received
        received += 1

    graph.observe_output_stream("out", observe)
    create = packet_creator.create_int
    add = graph.add_packet_to_input_stream
    start = time.perf_counter()
    cpu = cpu_seconds()
    graph.start_run()
    for i in range(count):
        add("in", create(i).at(i))
    graph.close_all_packet_sources()
    graph.wait_until_done()
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds() - cpu
    if received != count:
        raise SystemExit(f"MediaPipe delivered {received} of {count} packets")
    return count / elapsed, cpu / count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chain", type=int, required=True)
    parser.add_argument("-n", "--packets", type=int, default=100_000)
    parser.add_argument("--max-queue-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.repeats):
        rate, cpu = run(args.chain, args.packets, args.max_queue_size)
        print(
            json.dumps({"chain": args.chain, "packets_per_second": rate, "cpu_per_packet": cpu}),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
