"""Side packets built once per loaded graph from node options (OVMS's LLM_NODE_RESOURCES).

Some calculators need an expensive object behind a side packet (a model, an engine process) that
must outlive single runs. Such a calculator names, per input side-packet tag, a factory that builds
that object from its node's config. The application builds and starts these resources when it
loads a graph, hands them to every run as side packets, and stops them when the graph is unloaded.
As in OVMS, the side packet holds a map from node name to resource, because one side-packet name
may serve several nodes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from graphruntime.validation import NodeSpec, ValidatedGraph

logger = logging.getLogger(__name__)


class NodeResource(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


# (graph, node, name of the servable the graph belongs to) -> resource
ResourceFactory = Callable[[ValidatedGraph, NodeSpec, str], NodeResource]


class GraphResources:
    """The resources of one loaded graph, keyed by side-packet name, then node name."""

    def __init__(self, graph: ValidatedGraph, owner: str) -> None:
        self.graph = graph
        self.by_side_packet: dict[str, dict[str, NodeResource]] = {}
        for node in graph.nodes:
            factories: Mapping[str, ResourceFactory] = getattr(
                node.calculator, "resource_factories", {}
            )
            for tag, factory in factories.items():
                flat_id = node.input_side_packets.find(tag)
                if flat_id is None:
                    continue
                name = node.input_side_packets.names[flat_id]
                self.by_side_packet.setdefault(name, {})[node.name] = factory(graph, node, owner)

    def all(self) -> list[NodeResource]:
        return [r for per_node in self.by_side_packet.values() for r in per_node.values()]

    @property
    def side_packets(self) -> dict[str, Any]:
        return {name: dict(per_node) for name, per_node in self.by_side_packet.items()}

    async def start(self) -> None:
        """Start every resource; if one fails, stop the others and re-raise."""
        resources = self.all()
        results = await asyncio.gather(*(r.start() for r in resources), return_exceptions=True)
        failures = [result for result in results if isinstance(result, BaseException)]
        if failures:
            await self.stop()
            raise failures[0]

    async def stop(self) -> None:
        results = await asyncio.gather(*(r.stop() for r in self.all()), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                logger.warning("stopping a graph resource failed: %s", result)
