"""Check a graph config against MediaPipe's rules and turn it into a `ValidatedGraph`.

Validation asks every node's calculator for its contract, wires streams and side packets to their
producers, orders the nodes topologically (back edges excluded) and picks each node's input stream
handler, all before anything runs. Every problem is collected, not only the first, and each one
points at the line of the graph file it concerns; the wording follows MediaPipe's messages so its
users can search for them. A `ValidatedGraph` is immutable and can be run any number of times,
concurrently, by `Graph` objects.

The checks of each node alone are in node_checks.py; here are the graph-wide passes (executors,
stream and side-packet wiring, order, types, back edges) and the result they build (NodeSpec,
ValidatedGraph). The passes share one state (the nodes' findings, producers and order), which is
why this module stays a little above 400 lines.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from graphruntime._proto import calculator_pb2
from graphruntime.calculator import Calculator, hook_is_async
from graphruntime.config import (
    GraphConfig,
    SubgraphUse,
    canonical_node_names,
    load_graph_config,
    parse_graph_config,
)
from graphruntime.contract import CalculatorContract
from graphruntime.errors import (
    GraphValidationError,
    SourceLocation,
    ValidationIssue,
)
from graphruntime.executors import ExecutorSet
from graphruntime.node_checks import NodeChecker
from graphruntime.services import GraphService
from graphruntime.stream_handlers import InputStreamHandler
from graphruntime.subgraph_expansion import expand_subgraphs
from graphruntime.subgraphs import SubgraphLibrary
from graphruntime.tags import TagMap

logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_SIZE = 100
RESERVED_EXECUTORS = ("default", "gpu")
GRAPH_INPUT = -1

Endpoint = tuple[int, int]  # (node index, or GRAPH_INPUT; flat port id)


@dataclass(frozen=True)
class NodeSpec:
    """One node as validated: ports, implementation and scheduling choices."""

    index: int  # position in topological order ("sorted index")
    config_index: int  # position in the graph file
    name: str
    calculator_name: str
    calculator: type[Calculator]
    inputs: TagMap
    outputs: TagMap
    input_side_packets: TagMap
    output_side_packets: TagMap
    back_edges: frozenset[int]
    handler: type[InputStreamHandler]
    handler_options: Message | None
    timestamp_offset: int | None
    process_timestamp_bounds: bool
    max_in_flight: int
    executor: str
    source_layer: int
    buffer_size_hint: int
    input_types: tuple[Any, ...]
    output_types: tuple[Any, ...]
    optional_side_packets: frozenset[int]
    location: SourceLocation | None
    async_hooks: frozenset[str]
    services: tuple[tuple[GraphService[Any], bool], ...] = ()  # (service, required)
    subgraphs: tuple[
        SubgraphUse, ...
    ] = ()  # the subgraph uses it was expanded from, outermost first

    @property
    def is_source(self) -> bool:
        return len(self.inputs) == 0


class ValidatedGraph:
    """A graph config that passed validation; see the module docstring."""

    def __init__(
        self,
        config: GraphConfig,
        nodes: tuple[NodeSpec, ...],
        input_streams: TagMap,
        output_streams: TagMap,
        producers: Mapping[str, Endpoint],
        consumers: Mapping[str, tuple[Endpoint, ...]],
        side_packet_producers: Mapping[str, Endpoint],
        external_side_packets: Mapping[str, bool],
        warnings: Sequence[ValidationIssue],
    ) -> None:
        self.config = config
        self.nodes = nodes
        self.input_streams = input_streams
        self.output_streams = output_streams
        self.producers = dict(producers)
        self.consumers = dict(consumers)
        self.side_packet_producers = dict(side_packet_producers)
        self.external_side_packets = dict(external_side_packets)
        self.warnings = tuple(warnings)
        proto = config.proto
        self.max_queue_size = proto.max_queue_size or DEFAULT_MAX_QUEUE_SIZE
        self.report_deadlock = proto.report_deadlock
        self.num_threads = proto.num_threads if proto.num_threads > 0 else None
        self.executor_configs = {
            executor.name: executor for executor in proto.executor if executor.name
        }
        # Thread pools live here, not in a run, so concurrent runs of this graph share threads.
        self.executors = ExecutorSet(self)

    @property
    def path(self) -> str | None:
        return self.config.path

    @property
    def directory(self) -> str:
        """Directory relative paths in node options are resolved against."""
        return (
            os.path.dirname(os.path.abspath(self.config.path)) if self.config.path else os.getcwd()
        )

    def node(self, name: str) -> NodeSpec:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f'no node named "{name}"')

    def node_options(self, node: NodeSpec, message_type: type[Message]) -> Message | None:
        return self.config.decode_options(("node", node.config_index), message_type)

    def stream_names(self) -> list[str]:
        return sorted(self.producers)

    @classmethod
    def from_config(
        cls,
        config: GraphConfig | calculator_pb2.CalculatorGraphConfig | str,
        *,
        subgraph_paths: Sequence[str | os.PathLike[str]] = (),
    ) -> ValidatedGraph:
        """Validate a parsed config, a proto message, or graph text, after expanding its
        subgraphs (found as subgraphs.py says, `subgraph_paths` searched after the graph's own
        directory)."""
        if isinstance(config, str):
            config = parse_graph_config(config)
        elif isinstance(config, calculator_pb2.CalculatorGraphConfig):
            config = GraphConfig.from_proto(config)
        return _Validator(expand_subgraphs(config, SubgraphLibrary(subgraph_paths))).run()

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        *,
        subgraph_paths: Sequence[str | os.PathLike[str]] = (),
    ) -> ValidatedGraph:
        return cls.from_config(load_graph_config(path), subgraph_paths=subgraph_paths)


def validate_graph(config: GraphConfig | str) -> ValidatedGraph:
    return ValidatedGraph.from_config(config)


class _Validator(NodeChecker):
    """The graph-wide passes, run after every node's own checks (node_checks.py)."""

    def run(self) -> ValidatedGraph:
        proto = self.proto
        input_streams = self.tag_map(proto.input_stream, "input_stream")
        output_streams = self.tag_map(proto.output_stream, "output_stream")
        self.tag_map(proto.input_side_packet, "input_side_packet")
        self.tag_map(proto.output_side_packet, "output_side_packet")
        self.check_executors()
        names = canonical_node_names(proto.node)
        partial = [self.check_node(i, names[i]) for i in range(len(proto.node))]

        producers: dict[str, Endpoint] = {}
        for flat_id, name in enumerate(input_streams.names):
            producers[name] = (GRAPH_INPUT, flat_id)
        for i, node in enumerate(partial):
            for flat_id, name in enumerate(node["outputs"].names):
                if name in producers:
                    self.out.error(
                        f'Output Stream "{name}" defined twice.',
                        self.spec_location(
                            ("node", i),
                            "output_stream",
                            node["outputs"].tag_index(flat_id),
                            proto.node[i].output_stream,
                        ),
                    )
                else:
                    producers[name] = (i, flat_id)
        side_producers: dict[str, Endpoint] = {}
        for i, node in enumerate(partial):
            for flat_id, name in enumerate(node["output_side_packets"].names):
                if name in side_producers:
                    self.out.error(
                        f'Output Side Packet "{name}" defined twice.', self.location("node", i)
                    )
                else:
                    side_producers[name] = (i, flat_id)

        order = self.sort(partial, producers, side_producers, names)
        sorted_index = {config_index: rank for rank, config_index in enumerate(order)}

        consumers: dict[str, list[Endpoint]] = {}
        external: dict[str, bool] = {}
        for i, node in enumerate(partial):
            for flat_id, name in enumerate(node["inputs"].names):
                if name not in producers:
                    self.out.error(
                        f'Input Stream "{name}" for node with sorted index '
                        f"{sorted_index.get(i, i)} name {names[i]} does not have a corresponding "
                        "output stream.",
                        self.spec_location(
                            ("node", i),
                            "input_stream",
                            node["inputs"].tag_index(flat_id),
                            proto.node[i].input_stream,
                        ),
                    )
                    continue
                consumers.setdefault(name, []).append((sorted_index.get(i, i), flat_id))
                self.check_types(i, names[i], node, flat_id, name, producers[name], partial)
            for flat_id, name in enumerate(node["input_side_packets"].names):
                if name in side_producers:
                    continue
                required = flat_id not in node["optional_side_packets"]
                external[name] = external.get(name, False) or required
            self.check_back_edges(i, names[i], node, producers, sorted_index)

        if self.out.issues:
            raise GraphValidationError(self.out.issues)
        for warning in self.out.warnings:
            logger.warning("%s", warning)

        specs = tuple(
            self.build_spec(rank, config_index, names[config_index], partial[config_index])
            for rank, config_index in enumerate(order)
        )
        return ValidatedGraph(
            self.config,
            specs,
            input_streams,
            output_streams,
            {
                name: (sorted_index[node], flat_id) if node != GRAPH_INPUT else (node, flat_id)
                for name, (node, flat_id) in producers.items()
            },
            {name: tuple(endpoints) for name, endpoints in consumers.items()},
            {
                name: (sorted_index[node], flat_id)
                for name, (node, flat_id) in side_producers.items()
            },
            external,
            self.out.warnings,
        )

    def check_executors(self) -> None:
        seen: set[str] = set()
        for i, executor in enumerate(self.proto.executor):
            location = self.location("executor", i)
            if executor.name in RESERVED_EXECUTORS or executor.name.startswith("__"):
                self.out.error(f'"{executor.name}" is a reserved executor name.', location)
            elif executor.name in seen:
                self.out.error(f'ExecutorConfig for "{executor.name}" is duplicate.', location)
            elif executor.name == "" and self.proto.num_threads:
                self.out.error(
                    "num_threads is set and the default executor is also configured by an "
                    "ExecutorConfig; set the thread count in one place only.",
                    location,
                )
            seen.add(executor.name)
            if executor.type not in ("", "ThreadPoolExecutor", "ApplicationThreadExecutor"):
                self.out.error(f'Executor type "{executor.type}" is not supported.', location)

    def sort(
        self,
        partial: list[dict[str, Any]],
        producers: Mapping[str, Endpoint],
        side_producers: Mapping[str, Endpoint],
        names: Sequence[str],
    ) -> list[int]:
        """Topological order by stream and side-packet edges, back edges excluded.

        Ties go to the node written first, so the order is stable and matches the file when the
        file is already in dataflow order.
        """
        count = len(partial)
        successors: list[set[int]] = [set() for _ in range(count)]
        indegree = [0] * count
        for consumer, node in enumerate(partial):
            upstream: set[int] = set()
            for flat_id, name in enumerate(node["inputs"].names):
                producer = producers.get(name)
                if producer and producer[0] != GRAPH_INPUT and flat_id not in node["back_edges"]:
                    upstream.add(producer[0])
            for name in node["input_side_packets"].names:
                side_producer = side_producers.get(name)
                if side_producer:
                    upstream.add(side_producer[0])
            for producer_index in upstream:
                if consumer not in successors[producer_index]:
                    successors[producer_index].add(consumer)
                    indegree[consumer] += 1
        ready = [i for i in range(count) if indegree[i] == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            current = heapq.heappop(ready)
            order.append(current)
            for successor in sorted(successors[current]):
                indegree[successor] -= 1
                if indegree[successor] == 0:
                    heapq.heappush(ready, successor)
        if len(order) < count:
            stuck = [i for i in range(count) if i not in set(order)]
            cycle = self.find_cycle(stuck, successors)
            self.out.error(
                "Generator side packet cycle or calculator stream cycle detected in graph: ["
                + ", ".join(names[i] for i in cycle)
                + "]. Mark the edge that closes the loop with input_stream_info { tag_index: "
                '"TAG:0" back_edge: true }.',
                self.location("node", cycle[0]),
            )
            order.extend(stuck)
        return order

    @staticmethod
    def find_cycle(stuck: Sequence[int], successors: Sequence[set[int]]) -> list[int]:
        members = set(stuck)
        path: list[int] = []
        position: dict[int, int] = {}
        current = stuck[0]
        while current not in position:
            position[current] = len(path)
            path.append(current)
            current = min(s for s in successors[current] if s in members)
        return path[position[current] :]

    def check_types(
        self,
        i: int,
        name: str,
        node: dict[str, Any],
        flat_id: int,
        stream: str,
        producer: Endpoint,
        partial: list[dict[str, Any]],
    ) -> None:
        contract: CalculatorContract | None = node["contract"]
        producer_index, producer_port = producer
        if contract is None or producer_index == GRAPH_INPUT:
            return
        producer_contract: CalculatorContract | None = partial[producer_index]["contract"]
        if producer_contract is None:
            return
        expected = contract.inputs.declared_type(flat_id)
        given = producer_contract.outputs.declared_type(producer_port)
        if _incompatible(given, expected):
            self.out.error(
                f'Input stream "{stream}" of calculator "{name}" expects packets of type '
                f'"{_type_name(expected)}" but the connected output stream will contain packets '
                f'of type "{_type_name(given)}"',
                self.location("node", i),
            )

    def check_back_edges(
        self,
        i: int,
        name: str,
        node: dict[str, Any],
        producers: Mapping[str, Endpoint],
        sorted_index: Mapping[int, int],
    ) -> None:
        for flat_id in node["back_edges"]:
            stream = node["inputs"].names[flat_id]
            producer = producers.get(stream)
            if producer is None:
                continue
            # A graph input is available before any node, so marking it is never necessary.
            upstream = producer[0] == GRAPH_INPUT or (
                sorted_index.get(producer[0], 0) < sorted_index.get(i, 0)
            )
            if upstream:
                self.out.warn(
                    f'Input Stream "{stream}" for node with sorted index {sorted_index.get(i, i)} '
                    f"name {name} is marked as a back edge, but its output stream is already "
                    "available.  This means it was not necessary to mark it as a back edge.",
                    self.spec_location(
                        ("node", i),
                        "input_stream",
                        node["inputs"].tag_index(flat_id),
                        self.proto.node[i].input_stream,
                    ),
                )

    def build_spec(self, rank: int, config_index: int, name: str, node: dict[str, Any]) -> NodeSpec:
        proto_node = self.proto.node[config_index]
        contract: CalculatorContract = node["contract"]
        calculator: type[Calculator] = node["calculator"]
        inputs: TagMap = node["inputs"]
        outputs: TagMap = node["outputs"]
        return NodeSpec(
            index=rank,
            config_index=config_index,
            name=name,
            calculator_name=proto_node.calculator,
            calculator=calculator,
            inputs=inputs,
            outputs=outputs,
            input_side_packets=node["input_side_packets"],
            output_side_packets=node["output_side_packets"],
            back_edges=node["back_edges"],
            handler=node["handler"],
            handler_options=node["handler_options"],
            timestamp_offset=contract.timestamp_offset,
            process_timestamp_bounds=contract.process_timestamp_bounds,
            max_in_flight=max(1, proto_node.max_in_flight),
            executor=proto_node.executor,
            source_layer=proto_node.source_layer,
            buffer_size_hint=proto_node.buffer_size_hint,
            input_types=tuple(contract.inputs.declared_type(k) for k in range(len(inputs))),
            output_types=tuple(contract.outputs.declared_type(k) for k in range(len(outputs))),
            optional_side_packets=node["optional_side_packets"],
            location=self.location("node", config_index),
            async_hooks=frozenset(
                hook for hook in ("open", "process", "close") if hook_is_async(calculator, hook)
            ),
            services=tuple(contract.services.items()),
            subgraphs=self.config.subgraphs(config_index),
        )


def _type_name(payload_type: Any) -> str:
    return getattr(payload_type, "__qualname__", None) or repr(payload_type)


def _incompatible(given: Any, expected: Any) -> bool:
    """True only when both sides name concrete classes and `given` is not a subclass."""
    if expected is object or given is object or expected is Any or given is Any:
        return False
    if isinstance(given, type) and isinstance(expected, type):
        return not issubclass(given, expected)
    return False


__all__ = ["GRAPH_INPUT", "NodeSpec", "ValidatedGraph", "validate_graph"]
