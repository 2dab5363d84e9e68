"""Unit-test one calculator from a pbtxt node snippet, without writing a graph around it.

    runner = CalculatorRunner('''
        calculator: "UppercaseCalculator"
        input_stream: "TEXT:in"
        output_stream: "TEXT:out"
    ''')
    runner.add("TEXT", Packet("hi", 0))
    runner.run()
    assert [p.payload for p in runner.outputs("TEXT")] == ["HI"]

The snippet is the body of a `node { ... }` block. Every input stream of the node becomes a graph
input and every output stream is collected, so the calculator runs with the real scheduler,
stream handler and timestamp rules — exactly as in a graph.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from graphruntime.config import parse_graph_config
from graphruntime.graph import Graph
from graphruntime.packet import Packet
from graphruntime.tags import TagMap, parse_tag_index
from graphruntime.validation import ValidatedGraph


class CalculatorRunner:
    """See the module docstring. `run()` may be called again after adding more packets."""

    def __init__(self, node: str, *, side_packets: Mapping[str, Any] | None = None) -> None:
        probe = parse_graph_config(f"node {{\n{node}\n}}")
        proto = probe.proto.node[0]
        inputs = TagMap.from_specs(proto.input_stream)
        outputs = TagMap.from_specs(proto.output_stream)
        back_edges = {
            parse_tag_index(info.tag_index) for info in proto.input_stream_info if info.back_edge
        }
        header = [
            f'input_stream: "{name}"'
            for tag, index, name in inputs.items()
            if (tag, index) not in back_edges
        ]
        header += [f'output_stream: "{name}"' for name in outputs.names]
        self.graph = ValidatedGraph.from_config("\n".join(header) + f"\nnode {{\n{node}\n}}")
        self.node = self.graph.nodes[0]
        self.side_packets = dict(side_packets or {})
        self._inputs: dict[tuple[str, int], list[Packet[Any]]] = {}
        self._outputs: dict[str, list[Packet[Any]]] = {name: [] for name in outputs.names}

    def _stream(self, tags: TagMap, tag: str, index: int) -> str:
        return tags.names[tags.id(tag, index)]

    def add(self, tag: str, packet: Packet[Any], index: int = 0) -> None:
        """Queue a packet for input TAG:INDEX (delivered in order by `run`)."""
        self._inputs.setdefault((tag, index), []).append(packet)

    def outputs(self, tag: str, index: int = 0) -> list[Packet[Any]]:
        return self._outputs[self._stream(self.node.outputs, tag, index)]

    def _collect(self, stream: str, packet: Packet[Any]) -> None:
        self._outputs[stream].append(packet)

    def run(self) -> None:
        """Run the node once over every queued packet; raises GraphRunError if it fails."""
        asyncio.run(self.run_async())

    async def run_async(self) -> None:
        graph = Graph(self.graph)
        for collected_name in self._outputs:
            graph.observe_output_stream(collected_name, self._collect)
        await graph.start_run(self.side_packets)
        queued, self._inputs = self._inputs, {}
        ordered = sorted(
            (
                (packet, tag, index)
                for (tag, index), packets in queued.items()
                for packet in packets
            ),
            key=lambda item: int(item[0].timestamp),
        )
        for packet, tag, index in ordered:
            await graph.add_packet(self._stream(self.node.inputs, tag, index), packet)
        graph.close_all_packet_sources()
        await graph.wait_until_done()
