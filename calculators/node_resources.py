"""A node's servable, from the `*_NODE_RESOURCES` side packet its graph was loaded with.

As in OVMS, the side packet maps node names to the servables built for them (several nodes may
share one side packet name), and a node that finds none is refused with OVMS's message.
"""

from __future__ import annotations

from typing import TypeVar

from graphruntime import CalculatorContext
from servables.errors import ServableError

S = TypeVar("S")


def node_servable(cc: CalculatorContext, tag: str, kind: type[S], what: str) -> S:
    """This node's servable of type `kind` from side packet `tag` (`what`: OVMS's word for it,
    in "Could not find initialized <what> node named: <node>")."""
    servables = cc.input_side_packets[tag].payload
    servable = servables.get(cc.node_name) if isinstance(servables, dict) else None
    if not isinstance(servable, kind):
        raise ServableError(f"Could not find initialized {what} node named: {cc.node_name}")
    return servable
