"""graphruntime: a MediaPipe-style dataflow graph runtime in Python.

Reads graph.pbtxt (CalculatorGraphConfig text format), validates it with MediaPipe's rules and
runs it with MediaPipe's semantics on an asyncio event loop. Knows nothing of HTTP or LLMs.
"""

from graphruntime.calculator import (
    Calculator,
    Input,
    InputSidePacket,
    Output,
    OutputSidePacket,
    StatusStop,
)
from graphruntime.calculator_graph import CalculatorGraph
from graphruntime.config import GraphConfig, load_graph_config, parse_graph_config
from graphruntime.context import CalculatorContext
from graphruntime.contract import CalculatorContract
from graphruntime.errors import (
    CalculatorError,
    GraphConfigError,
    GraphError,
    GraphRunError,
    GraphUsageError,
    GraphValidationError,
    PacketError,
    SourceLocation,
    ValidationIssue,
)
from graphruntime.function import calculator_function
from graphruntime.graph import AddMode, Graph, GraphThrottledError, OutputStreamPoller
from graphruntime.packet import Packet
from graphruntime.registry import register_calculator, register_input_stream_handler
from graphruntime.services import GraphService
from graphruntime.stream_handlers import InputStreamHandler
from graphruntime.subgraph_expansion import SubgraphError, expand_subgraphs
from graphruntime.subgraphs import (
    SubgraphContext,
    SubgraphLibrary,
    register_subgraph,
    subgraph_registry,
)
from graphruntime.timestamp import Timestamp
from graphruntime.validation import NodeSpec, ValidatedGraph

__all__ = [
    "AddMode",
    "Calculator",
    "CalculatorContext",
    "CalculatorContract",
    "CalculatorError",
    "CalculatorGraph",
    "Graph",
    "GraphConfig",
    "GraphConfigError",
    "GraphError",
    "GraphRunError",
    "GraphService",
    "GraphThrottledError",
    "GraphUsageError",
    "GraphValidationError",
    "Input",
    "InputSidePacket",
    "InputStreamHandler",
    "NodeSpec",
    "Output",
    "OutputSidePacket",
    "OutputStreamPoller",
    "Packet",
    "PacketError",
    "SourceLocation",
    "StatusStop",
    "SubgraphContext",
    "SubgraphError",
    "SubgraphLibrary",
    "Timestamp",
    "ValidatedGraph",
    "ValidationIssue",
    "calculator_function",
    "expand_subgraphs",
    "load_graph_config",
    "parse_graph_config",
    "register_calculator",
    "register_input_stream_handler",
    "register_subgraph",
    "subgraph_registry",
]
