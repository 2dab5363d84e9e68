"""Whether a pipeline's nodes form a DAG that can run, and at which demultiplexing level each runs.

These are OVMS's checks that need no model (`src/dags/pipelinedefinition.cpp`): unique node
names, connections to existing nodes and data items, no cycle, every node leading to the
response, `gather_from_node` naming a demultiplexer, a dynamic `demultiply_count` only in a
pipeline with one demultiplexer, and OVMS's rule that demultiplexers are gathered in LIFO order
with every node's inputs coming from one level. A custom node (a C library) cannot run here and
is refused with its name and library.

A node's *level* is the stack of demultiplexers whose branches it runs in, outermost first: a
node with `gather_from_node` stacks the branches of its inputs' innermost one (which must be
that node) and runs one level up; a demultiplexer's outputs are one level deeper than the node
runs. The response gathers every level its inputs still have, innermost first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from graphrt.serving.dag.config import CUSTOM, REQUEST, RESPONSE, PipelineConfig, Source
from servables.errors import ServableLoadError

Level = tuple[str, ...]


class PipelineError(ServableLoadError):
    """The pipeline cannot be served; the message says why (it names the pipeline)."""

    def __init__(self, pipeline: str, message: str) -> None:
        super().__init__(f"pipeline {pipeline}: {message}")


@dataclass(frozen=True)
class PipelineLayout:
    """The nodes in an order where every node follows its sources, and their levels."""

    order: tuple[str, ...]
    run_levels: Mapping[str, Level]  # the level a node runs at (after its gathering)
    output_levels: Mapping[str, Level]  # the level of a node's data items (request's too)
    response_level: Level  # what the response gathers, innermost last


def _sources(config: PipelineConfig) -> dict[str, tuple[tuple[str, Source], ...]]:
    """Each node's connections, the response's (the pipeline outputs) included."""
    connections = {node.name: node.inputs for node in config.nodes}
    connections[RESPONSE] = config.outputs
    return connections


def _check_names(config: PipelineConfig, libraries: Mapping[str, str]) -> None:
    fail = config.name
    seen: set[str] = set()
    for node in config.nodes:
        if node.name in (REQUEST, RESPONSE):
            raise PipelineError(fail, f"a node cannot be named {node.name!r} (the pipeline's own)")
        if node.name in seen:
            raise PipelineError(fail, f"has multiple nodes with name {node.name!r}")
        seen.add(node.name)
        if node.kind == CUSTOM:
            path = libraries.get(node.library_name)
            where = f" ({path})" if path else " (not in custom_node_library_config_list)"
            raise PipelineError(
                fail,
                f"node {node.name!r} is a custom node of library {node.library_name!r}{where}: "
                "graphrt does not load OVMS's custom node libraries (C shared objects); write "
                "the step as a Python calculator and serve a graph (mediapipe_config_list)",
            )
        names = [name for name, _ in node.inputs]
        repeated = next((name for name in names if names.count(name) > 1), None)
        if repeated is not None:
            raise PipelineError(
                fail, f"node {node.name!r} input {repeated!r} is connected to more than one source"
            )
    repeated = next((n for n in config.inputs if config.inputs.count(n) > 1), None)
    if repeated is not None:
        raise PipelineError(fail, f"has duplicated input declaration {repeated!r}")


def _check_connections(config: PipelineConfig) -> None:
    for consumer, connections in _sources(config).items():
        for _, source in connections:
            if source.node == RESPONSE:
                raise PipelineError(
                    config.name, f"node {consumer!r} uses the response node as a dependency"
                )
            if source.node == consumer:
                raise PipelineError(config.name, f"node {consumer!r} is connected to itself")
            if source.node == REQUEST:
                if source.data_item not in config.inputs:
                    raise PipelineError(
                        config.name,
                        f"node {consumer!r} refers to missing data item {source.data_item!r} "
                        f"of the request (pipeline inputs: {', '.join(config.inputs) or 'none'})",
                    )
                continue
            producer = config.node(source.node)
            if producer is None:
                raise PipelineError(
                    config.name,
                    f"node {consumer!r} is connected to missing dependency node {source.node!r}",
                )
            if producer.output(source.data_item) is None:
                aliases = ", ".join(alias for alias, _ in producer.outputs) or "none"
                raise PipelineError(
                    config.name,
                    f"node {consumer!r} refers to missing data item {source.data_item!r} of node "
                    f"{source.node!r} (its outputs: {aliases})",
                )


def _order(config: PipelineConfig) -> tuple[str, ...]:
    """Nodes after their sources (Kahn's algorithm); a cycle or a node that does not lead to
    the response is an error."""
    connections = _sources(config)
    sources = {
        name: {s.node for _, s in links if s.node != REQUEST} for name, links in connections.items()
    }
    order: list[str] = []
    ready = [name for name in connections if not sources[name]]
    while ready:
        name = ready.pop(0)
        order.append(name)
        for other, needs in sources.items():
            if name in needs:
                needs.discard(name)
                if not needs and other not in order:
                    ready.append(other)
    left = {name: needs for name, needs in sources.items() if name not in order}
    while True:  # what waits on a cycle without being on one is not named
        waiting = {name for name in left if not any(name in needs for needs in left.values())}
        if not waiting:
            break
        left = {name: needs for name, needs in left.items() if name not in waiting}
    if left:
        raise PipelineError(config.name, f"nodes {', '.join(sorted(left))} form a cycle")
    reaching = {RESPONSE}
    for name in reversed(order):
        if name in reaching:
            reaching.update(s.node for _, s in connections[name])
    unconnected = [node.name for node in config.nodes if node.name not in reaching]
    if unconnected:
        raise PipelineError(
            config.name, f"node {unconnected[0]!r} is not connected to the response"
        )
    return tuple(name for name in order if name != RESPONSE)


def _check_demultiplexers(config: PipelineConfig) -> None:
    counts = {node.name: node.demultiply_count for node in config.nodes}
    counts[REQUEST] = config.demultiply_count
    demultiplexers = [name for name, count in counts.items() if count is not None]
    if -1 in counts.values() and len(demultiplexers) > 1:
        raise PipelineError(
            config.name,
            "has multiple demultiplexers with at least one dynamic (demultiply_count -1); a "
            "dynamic one must be the only one",
        )
    for node in config.nodes:
        gather = node.gather_from_node
        if gather is None:
            continue
        if gather not in counts:
            raise PipelineError(
                config.name, f"node {node.name!r} gathers from {gather!r}, which does not exist"
            )
        if counts[gather] is None:
            raise PipelineError(
                config.name,
                f"node {node.name!r} gathers from {gather!r}, which is not a demultiplexer",
            )


def _level_of(
    config: PipelineConfig,
    consumer: str,
    links: tuple[tuple[str, Source], ...],
    levels: Mapping[str, Level],
) -> Level:
    found = {source.node: levels[source.node] for _, source in links}
    distinct = set(found.values())
    if len(distinct) > 1:
        described = "; ".join(
            f"{node}: [{', '.join(level)}]" for node, level in sorted(found.items())
        )
        raise PipelineError(
            config.name,
            f"node {consumer!r} takes inputs from different demultiplexing levels ({described}); "
            "gather them first (gather_from_node)",
        )
    return next(iter(distinct), ())


def layout(config: PipelineConfig, libraries: Mapping[str, str]) -> PipelineLayout:
    """Check the pipeline's structure (module docstring); raises PipelineError."""
    _check_names(config, libraries)
    _check_connections(config)
    order = _order(config)
    _check_demultiplexers(config)
    demultiplied = config.demultiply_count is not None
    output_levels: dict[str, Level] = {REQUEST: (REQUEST,) if demultiplied else ()}
    run_levels: dict[str, Level] = {}
    for name in order:
        node = config.node(name)
        assert node is not None
        level = _level_of(config, name, node.inputs, output_levels)
        if node.gather_from_node is not None:
            if not level or level[-1] != node.gather_from_node:
                innermost = level[-1] if level else "none"
                raise PipelineError(
                    config.name,
                    f"node {name!r} gathers from {node.gather_from_node!r}, but the innermost "
                    f"demultiplexer of its inputs is {innermost}: demultiplexers must be "
                    "gathered in LIFO order",
                )
            level = level[:-1]
        run_levels[name] = level
        output_levels[name] = (*level, name) if node.demultiply_count is not None else level
    response_level = _level_of(config, RESPONSE, config.outputs, output_levels)
    return PipelineLayout(order, run_levels, output_levels, response_level)
