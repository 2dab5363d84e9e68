"""`graphrt graph profile`: run a graph once on sample input and print where the time went.

    graphrt graph profile graph.pbtxt --input in=1 --input in=2 --side_packet scale=3 \\
        [--repeat 100] [--trace_dir DIR] [--python_path DIR] [--import MODULE]

Each `--input STREAM=VALUE` adds one packet to a graph input stream (timestamps 0, 1, ... per
stream, in the order given); `--repeat N` sends the whole sequence N times. Values are JSON when
they parse as JSON (numbers, lists, objects, quoted strings), else plain strings. Side packets take
values the same way. The graph's own resources (an LLM engine, say) are built and started as the
server would. The table lists per node the Process() calls, total, mean and p99 time and the share
of the run's wall time; with --trace_dir (or a profiler_config with trace_enabled) the Chrome
trace-event file is written too.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from graphruntime.config import load_graph_config
from graphruntime.errors import GraphError
from graphruntime.graph import Graph
from graphruntime.packet import Packet
from graphruntime.profiler import GraphProfiler, ProfilerSettings
from graphruntime.resources import GraphResources
from graphruntime.validation import ValidatedGraph
from servables.errors import ServableError


class UsageError(Exception):
    """A malformed --input or --side_packet; the message says which."""


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_assignments(items: Sequence[str], flag: str) -> list[tuple[str, Any]]:
    parsed = []
    for item in items:
        name, equals, value = item.partition("=")
        if not equals or not name:
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        parsed.append((name, parse_value(value)))
    return parsed


def profiler_for(graph: ValidatedGraph, trace_dir: str | None) -> GraphProfiler:
    """The graph's own profiler settings, with the per-node profile always on."""
    found = GraphProfiler.from_config(graph, trace_dir=trace_dir, name="profile")
    settings = found.settings if found is not None else ProfilerSettings()
    return GraphProfiler(graph, replace(settings, enable_profiler=True), "profile")


async def profile_graph(
    path: str,
    inputs: Sequence[str],
    side_packets: Sequence[str],
    repeat: int,
    trace_dir: str | None,
    subgraph_paths: Sequence[str] = (),
) -> GraphProfiler:
    graph = ValidatedGraph.from_config(load_graph_config(path), subgraph_paths=subgraph_paths)
    packets = parse_assignments(inputs, "--input")
    sides = dict(parse_assignments(side_packets, "--side_packet"))
    unknown = [name for name, _ in packets if name not in graph.input_streams.names]
    if unknown:
        known = ", ".join(graph.input_streams.names) or "none"
        raise UsageError(f"--input {unknown[0]}: the graph has no such input stream ({known})")
    profiler = profiler_for(graph, trace_dir)
    resources = GraphResources(graph, "profile")
    await resources.start()
    try:
        runner = Graph(graph, profiler=profiler)
        outputs: dict[str, int] = defaultdict(int)
        for stream in graph.output_streams.names:
            runner.observe_output_stream(stream, lambda name, _: _count(outputs, name))
        await runner.start_run({**resources.side_packets, **sides})
        timestamps: dict[str, int] = defaultdict(int)
        for _ in range(repeat):
            for stream, value in packets:
                await runner.add_packet(stream, Packet(value, timestamps[stream]))
                timestamps[stream] += 1
        runner.close_all_packet_sources()
        await runner.wait_until_done()
    finally:
        await resources.stop()
    for stream in graph.output_streams.names:
        print(f"output {stream}: {outputs[stream]} packets")
    return profiler


def _count(outputs: dict[str, int], stream: str) -> None:
    outputs[stream] += 1


def run(
    path: str,
    inputs: Sequence[str],
    side_packets: Sequence[str],
    repeat: int,
    trace_dir: str | None,
    subgraph_paths: Sequence[str] = (),
) -> int:
    try:
        profiler = asyncio.run(
            profile_graph(path, inputs, side_packets, repeat, trace_dir, subgraph_paths)
        )
    except UsageError as error:
        print(error, file=sys.stderr)
        return 2
    except (GraphError, ServableError) as error:
        print(f"{path}: {error.message}", file=sys.stderr)
        return 1
    sys.stdout.write(profiler.format_table())
    for written in profiler.files_written:
        print(f"trace: {written}")
    return 0
