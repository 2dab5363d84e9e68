"""Check a graph config against MediaPipe's rules and turn it into a `ValidatedGraph`.

Validation asks every node's calculator for its contract, wires streams and side packets to their
producers, orders the nodes topologically (back edges excluded) and picks each node's input stream
handler, all before anything runs. Every problem is collected, not only the first, and each one
points at the line of the graph file it concerns; the wording follows MediaPipe's messages so its
users can search for them. A `ValidatedGraph` is immutable and can be run any number of times,
concurrently, by `Graph` objects.
"""

from __future__ import annotations

import heapq
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.message import Message

from graphruntime._proto import calculator_pb2
from graphruntime.calculator import Calculator, hook_is_async
from graphruntime.config import GraphConfig, load_graph_config, parse_graph_config
from graphruntime.contract import CalculatorContract
from graphruntime.errors import (
    GraphConfigError,
    GraphValidationError,
    SourceLocation,
    ValidationIssue,
)
from graphruntime.executors import ExecutorSet
from graphruntime.registry import RegistryError, calculators, input_stream_handlers
from graphruntime.services import GraphService
from graphruntime.stream_handlers import InputStreamHandler
from graphruntime.tags import TagError, TagMap, parse_tag_index, parse_tag_index_name

logger = logging.getLogger(__name__)

DEFAULT_MAX_QUEUE_SIZE = 100
DEFAULT_HANDLER = "DefaultInputStreamHandler"
DEFAULT_OUTPUT_HANDLER = "InOrderOutputStreamHandler"
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

    @property
    def is_source(self) -> bool:
        return len(self.inputs) == 0


@dataclass
class _Collector:
    path: str | None
    issues: list[ValidationIssue] = field(default_factory=list)
    warnings: list[ValidationIssue] = field(default_factory=list)

    def error(self, message: str, location: SourceLocation | None) -> None:
        self.issues.append(ValidationIssue(message, location))

    def warn(self, message: str, location: SourceLocation | None) -> None:
        self.warnings.append(ValidationIssue(message, location))


def _canonical_names(nodes: Sequence[calculator_pb2.CalculatorGraphConfig.Node]) -> list[str]:
    base = [node.name or node.calculator for node in nodes]
    counts: dict[str, int] = {}
    for name in base:
        counts[name] = counts.get(name, 0) + 1
    seen: dict[str, int] = {}
    names = []
    for name in base:
        if counts[name] <= 1:
            names.append(name)
        else:
            seen[name] = seen.get(name, 0) + 1
            names.append(f"{name}_{seen[name]}")
    return names


def _option_type_known(type_name: str) -> bool:
    pool = descriptor_pool.Default()
    try:
        if type_name.endswith(".ext"):
            pool.FindExtensionByName(type_name)
        else:
            pool.FindMessageTypeByName(type_name)
    except KeyError:
        return False
    return True


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
        cls, config: GraphConfig | calculator_pb2.CalculatorGraphConfig | str
    ) -> ValidatedGraph:
        """Validate a parsed config, a proto message, or graph text."""
        if isinstance(config, str):
            config = parse_graph_config(config)
        elif isinstance(config, calculator_pb2.CalculatorGraphConfig):
            config = GraphConfig.from_proto(config)
        return _Validator(config).run()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ValidatedGraph:
        return cls.from_config(load_graph_config(path))


def validate_graph(config: GraphConfig | str) -> ValidatedGraph:
    return ValidatedGraph.from_config(config)


class _Validator:
    def __init__(self, config: GraphConfig) -> None:
        self.config = config
        self.proto = config.proto
        self.out = _Collector(config.path)

    def location(self, *path: str | int) -> SourceLocation | None:
        return self.config.location(*path)

    def tag_map(self, specs: Iterable[str], *path: str | int) -> TagMap:
        try:
            return TagMap.from_specs(specs)
        except TagError as error:
            self.out.error(str(error), self.location(*path))
            return TagMap.empty()

    def spec_location(
        self,
        path: tuple[str | int, ...],
        field_name: str,
        port: tuple[str, int],
        specs: Sequence[str],
    ) -> SourceLocation | None:
        """Location of the config entry that defines the (tag, index) `port` among `specs`."""
        tag, index = port
        untagged = 0
        for position, spec in enumerate(specs):
            try:
                parsed = parse_tag_index_name(spec)
            except TagError:
                continue
            parsed_index = parsed.index
            if parsed_index == -1:
                parsed_index = untagged
                untagged += 1
            if parsed.tag == tag and parsed_index == index:
                return self.location(*path, field_name, position)
        return self.location(*path)

    def run(self) -> ValidatedGraph:
        proto = self.proto
        input_streams = self.tag_map(proto.input_stream, "input_stream")
        output_streams = self.tag_map(proto.output_stream, "output_stream")
        self.tag_map(proto.input_side_packet, "input_side_packet")
        self.tag_map(proto.output_side_packet, "output_side_packet")
        self.check_executors()
        names = _canonical_names(proto.node)
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

    def check_node(self, i: int, name: str) -> dict[str, Any]:
        """Per-node checks that need no other node; returns what later passes use."""
        node = self.proto.node[i]
        where = ("node", i)
        location = self.location(*where)
        inputs = self.tag_map(node.input_stream, *where)
        outputs = self.tag_map(node.output_stream, *where)
        input_side = self.tag_map([*node.input_side_packet, *node.external_input], *where)
        output_side = self.tag_map(node.output_side_packet, *where)
        result: dict[str, Any] = {
            "inputs": inputs,
            "outputs": outputs,
            "input_side_packets": input_side,
            "output_side_packets": output_side,
            "back_edges": frozenset(),
            "calculator": None,
            "contract": None,
            "optional_side_packets": frozenset(),
            "handler": None,
            "handler_options": None,
        }
        back_edges: set[int] = set()
        seen_infos: set[tuple[str, int]] = set()
        for j, info in enumerate(node.input_stream_info):
            info_location = self.location(*where, "input_stream_info", j)
            try:
                tag, index = parse_tag_index(info.tag_index)
            except TagError as error:
                self.out.error(str(error), info_location)
                continue
            if (tag, index) in seen_infos:
                self.out.error(
                    f'Input stream with tag_index "{info.tag_index}" has more than one '
                    "InputStreamInfo.",
                    info_location,
                )
            seen_infos.add((tag, index))
            flat_id = inputs.find(tag, index)
            if flat_id is None:
                self.out.error(
                    f'Input stream with tag_index "{info.tag_index}" requested in InputStreamInfo '
                    "but is not an input stream of the calculator.",
                    info_location,
                )
            elif info.back_edge:
                back_edges.add(flat_id)
        result["back_edges"] = frozenset(back_edges)

        if node.executor and node.executor not in {e.name for e in self.proto.executor}:
            self.out.error(
                f'The executor "{node.executor}" is not declared in an ExecutorConfig.',
                self.location(*where, "executor"),
            )
        if node.max_in_flight < 0:
            self.out.error("max_in_flight must not be negative.", location)

        try:
            calculator = calculators.get(node.calculator)
        except RegistryError as error:
            self.out.error(
                f'Unable to load Calculator "{node.calculator}": {error}',
                self.location(*where, "calculator"),
            )
            return result
        if calculator is None:
            hint = calculators.suggestion(node.calculator)
            self.out.error(
                f'Unable to find Calculator "{node.calculator}"'
                + (f'; did you mean "{hint}"?' if hint else ""),
                self.location(*where, "calculator"),
            )
            return result
        result["calculator"] = calculator
        self.check_options(i, calculator)

        contract = CalculatorContract(
            name,
            inputs,
            outputs,
            input_side,
            output_side,
            lambda message_type: self.config.decode_options(where, message_type),
        )
        try:
            calculator.get_contract(contract)
        except (GraphConfigError, ValueError, TypeError, KeyError) as error:
            message = error.message if isinstance(error, GraphConfigError) else str(error)
            self.out.error(f"{node.calculator}: {message}", location)
            return result
        problems = contract.problems()
        if problems:
            self.out.error(
                f"{node.calculator}::GetContract failed to validate: " + " ".join(problems),
                location,
            )
        result["contract"] = contract
        result["optional_side_packets"] = frozenset(
            flat_id
            for flat_id in range(len(input_side))
            if contract.input_side_packets.is_optional(flat_id)
        )
        self.choose_handler(i, node, contract, inputs, result)
        return result

    def check_options(self, i: int, calculator: type[Calculator]) -> None:
        where = ("node", i)
        seen: set[str] = set()
        declared = calculator.options_type.DESCRIPTOR.full_name if calculator.options_type else None
        for owner in ("node_options", "options"):
            for type_name, location in self.config.option_type_names(*where, owner):
                base = type_name[: -len(".ext")] if type_name.endswith(".ext") else type_name
                if owner == "node_options":
                    if base in seen:
                        self.out.error(
                            f"Options type: 'type.googleapis.com/{base}' specified more than once "
                            "for a single calculator node config.",
                            location,
                        )
                    seen.add(base)
                if base != declared and not _option_type_known(type_name):
                    self.out.error(
                        f'options of type "{base}" are not known to this runtime (no calculator or '
                        "installed module defines them); remove the block or install the package "
                        "that provides them.",
                        location,
                    )

    def choose_handler(
        self,
        i: int,
        node: calculator_pb2.CalculatorGraphConfig.Node,
        contract: CalculatorContract,
        inputs: TagMap,
        result: dict[str, Any],
    ) -> None:
        """Node config, else graph default, else the contract's preference, else Default."""
        where = ("node", i)
        if node.HasField("input_stream_handler"):
            handler_name = node.input_stream_handler.input_stream_handler
            owner: tuple[str | int, ...] | None = (*where, "input_stream_handler", "options")
            location = self.location(*where, "input_stream_handler")
        elif self.proto.HasField("input_stream_handler"):
            handler_name = self.proto.input_stream_handler.input_stream_handler
            owner = ("input_stream_handler", "options")
            location = self.location("input_stream_handler")
        else:
            handler_name = contract.input_stream_handler or DEFAULT_HANDLER
            owner = None
            location = self.location(*where)
        handler = input_stream_handlers.get(handler_name)
        if handler is None:
            self.out.error(f'"{handler_name}" is not a registered input stream handler.', location)
            return
        options: Message | None = None
        if owner is not None and handler.options_type is not None:
            try:
                options = self.config.decode_options(owner, handler.options_type)
            except GraphConfigError as error:
                self.out.error(error.message, error.location or location)
        elif owner is None:
            options = contract.input_stream_handler_options
        for problem in handler.config_problems(inputs, options):
            self.out.error(problem, location)
        output_handler = node.output_stream_handler.output_stream_handler
        if node.HasField("output_stream_handler") and output_handler != DEFAULT_OUTPUT_HANDLER:
            self.out.error(
                f'"{output_handler}" is not a registered output stream handler.',
                self.location(*where, "output_stream_handler"),
            )
        result["handler"] = handler
        result["handler_options"] = options

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
