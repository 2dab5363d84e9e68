"""Build a Python node's handler (PYTHON_NODE_RESOURCES) from its node config, with OVMS's rules.

A Python node must be named, and no two Python nodes of a graph may share a name (the name keys
its handler in the side packet and reaches `initialize` as `node_name`); `handler_path` is
relative to the graph's directory unless absolute. `initialize` gets the node's stream names in
the order the graph file lists them, LOOPBACK's included, as OVMS passes them.
"""

from __future__ import annotations

from pathlib import Path

from calculators.model_paths import graph_relative
from calculators.python.python_calculators_pb2 import PythonExecutorCalculatorOptions
from graphruntime.tags import names_of
from graphruntime.validation import NodeSpec, ValidatedGraph
from servables.errors import ServableLoadError
from servables.python_model.handler import HandlerConfig, PythonHandler

CALCULATOR = "PythonExecutorCalculator"


def handler_config(graph: ValidatedGraph, node: NodeSpec, owner: str) -> HandlerConfig:
    """The node's script and names; ServableLoadError names what OVMS would refuse."""
    config = graph.config.proto.node[node.config_index]
    if not config.name:
        raise ServableLoadError(
            f"A {CALCULATOR} node of graph {owner} has no name; Python nodes must be named"
        )
    same_name = [n for n in graph.config.proto.node if n.calculator == CALCULATOR]
    if sum(1 for n in same_name if n.name == config.name) > 1:
        raise ServableLoadError(
            f'Python node name "{config.name}" is used by more than one node of graph {owner}; '
            "every Python node needs a name of its own"
        )
    options = graph.node_options(node, PythonExecutorCalculatorOptions)
    if not isinstance(options, PythonExecutorCalculatorOptions) or not options.handler_path:
        raise ServableLoadError(
            f'Python node "{config.name}" of graph {owner} needs '
            "PythonExecutorCalculatorOptions with a handler_path",
            param="handler_path",
        )
    return HandlerConfig(
        node_name=config.name,
        handler_path=graph_relative(options.handler_path, Path(graph.directory)),
        input_names=names_of(config.input_stream),
        output_names=names_of(config.output_stream),
    )


def build_python_handler(graph: ValidatedGraph, node: NodeSpec, owner: str) -> PythonHandler:
    return PythonHandler(handler_config(graph, node, owner))
