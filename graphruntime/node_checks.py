"""The checks of one graph node that need no other node, and the helpers every check uses.

A node's ports and InputStreamInfo entries (back edges), its executor and max_in_flight, its
calculator (found by name, with a suggestion when misspelled), the types of its option blocks,
the contract the calculator declares, and the input stream handler it runs under. Problems are
collected with the location of the config entry they concern, never raised one at a time; the
graph-wide passes that follow are in validation.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pool
from google.protobuf.message import Message

from graphruntime._proto import calculator_pb2
from graphruntime.calculator import Calculator
from graphruntime.config import GraphConfig
from graphruntime.contract import CalculatorContract
from graphruntime.errors import GraphConfigError, SourceLocation, ValidationIssue
from graphruntime.registry import RegistryError, calculators, input_stream_handlers
from graphruntime.tags import TagError, TagMap, parse_tag_index, parse_tag_index_name

DEFAULT_HANDLER = "DefaultInputStreamHandler"
DEFAULT_OUTPUT_HANDLER = "InOrderOutputStreamHandler"
# Said of an unknown calculator, since the name may have been meant as a subgraph's type.
NOT_A_SUBGRAPH = " (nor a subgraph in Python, the graph's directory or the subgraph path)"


@dataclass
class Findings:
    """The errors and warnings found so far, each with where it is in the graph file."""

    path: str | None
    issues: list[ValidationIssue] = field(default_factory=list)
    warnings: list[ValidationIssue] = field(default_factory=list)

    def error(self, message: str, location: SourceLocation | None) -> None:
        self.issues.append(ValidationIssue(message, location))

    def warn(self, message: str, location: SourceLocation | None) -> None:
        self.warnings.append(ValidationIssue(message, location))


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


class ConfigChecker:
    """A graph config under check: where each of its entries is, and what was found."""

    def __init__(self, config: GraphConfig) -> None:
        self.config = config
        self.proto = config.proto
        self.out = Findings(config.path)

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


class NodeChecker(ConfigChecker):
    """The per-node checks; see the module docstring."""

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
                + (f'; did you mean "{hint}"?' if hint else "")
                + NOT_A_SUBGRAPH,
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
            # Options stay opaque text until the contract decodes them (cc.options); a block that
            # does not parse as its type is reported where its fault is, not at the node.
            found = error.location if isinstance(error, GraphConfigError) else None
            self.out.error(f"{node.calculator}: {message}", found or location)
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
