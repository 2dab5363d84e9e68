"""Packets per second through chains of PassThroughCalculators, end to end.

Feeds N integer packets into `in`, through a chain of K PassThroughCalculators, and counts them
in an output-stream callback, timing start_run .. wait_until_done like MediaPipe's own
measurement (research: ~25k packets/s for 1 node and ~30k/s for 10 nodes with MediaPipe's C++
runtime driven from Python on these machines). Two drivers: the synchronous `CalculatorGraph`
(producer thread + graph thread, as MediaPipe) and the asyncio `Graph` (producer on the loop).

    python benchmarks/graph_passthrough.py [-n 100000] [--chains 1 10] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable

import calculators.core.pass_through  # noqa: F401  (registers PassThroughCalculator)
from graphruntime import CalculatorGraph, Graph, Packet, ValidatedGraph


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


DRIVERS: dict[str, Callable[[ValidatedGraph, int], float]] = {
    "sync": run_sync,
    "async": run_async,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--packets", type=int, default=100_000)
    parser.add_argument("--chains", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--drivers", nargs="+", default=list(DRIVERS), choices=list(DRIVERS))
    parser.add_argument("--max-queue-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"{'chain':>5} {'driver':>6} {'best pkt/s':>11} {'median':>9} {'us/pkt':>7}")
    for length in args.chains:
        graph = ValidatedGraph.from_config(chain_config(length, args.max_queue_size))
        for driver in args.drivers:
            rates = [DRIVERS[driver](graph, args.packets) for _ in range(args.repeats)]
            best = max(rates)
            print(
                f"{length:>5} {driver:>6} {best:>11,.0f} {statistics.median(rates):>9,.0f} "
                f"{1e6 / best:>7.1f}"
            )


if __name__ == "__main__":
    main()
