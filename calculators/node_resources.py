"""A node's servable: its options when the graph loads, and the servable from the
`*_NODE_RESOURCES` side packet when it runs.

As in OVMS, the side packet maps node names to the servables built for them (several nodes may
share one side packet name), and a node that finds none is refused with OVMS's message.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

from graphruntime import CalculatorContext
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.errors import ServableError, ServableLoadError

S = TypeVar("S")
Options = TypeVar("Options", bound=Message)


def node_options(graph: ValidatedGraph, node: NodeSpec, options_type: type[Options]) -> Options:
    """The node's options of `options_type`, which a servable's factory cannot build without."""
    options = graph.node_options(node, options_type)
    if not isinstance(options, options_type):
        name = options_type.DESCRIPTOR.name
        raise ServableLoadError(f'node "{node.name}" has no {name}')
    return options


def node_servable(cc: CalculatorContext, tag: str, kind: type[S], what: str) -> S:
    """This node's servable of type `kind` from side packet `tag` (`what`: OVMS's word for it,
    in "Could not find initialized <what> node named: <node>")."""
    servables = cc.input_side_packets[tag].payload
    servable = servables.get(cc.node_name) if isinstance(servables, dict) else None
    if not isinstance(servable, kind):
        raise ServableError(f"Could not find initialized {what} node named: {cc.node_name}")
    return servable
