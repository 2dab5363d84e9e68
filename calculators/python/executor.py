"""PythonExecutorCalculator: OVMS's Python node, which runs a script's `OvmsPythonModel.execute`.

    node {
      name: "python_node"
      calculator: "PythonExecutorCalculator"
      input_side_packet: "PYTHON_NODE_RESOURCES:py"
      input_stream: "INPUT:input"
      output_stream: "OUTPUT:output"
      node_options: {
        [type.googleapis.com / mediapipe.PythonExecutorCalculatorOptions]: {
          handler_path: "model.py"
        }
      }
    }

Each call hands `execute` the node's input packets (`pyovms.Tensor`s) in the order of their tags
(sorted, then by index), leaving out inputs without a packet at this timestamp (a node with
ImmediateInputStreamHandler sees incomplete sets). What `execute` returns goes out on the output
streams named like the returned tensors, at the input's timestamp (regular mode). When `execute`
yields instead (generative mode, which needs a LOOPBACK input and output on a back edge), each
call emits the generator's next list of tensors at the next timestamp, starting at the input's,
with a LOOPBACK packet that brings the node back for the next one; the cycle ends when the
generator does. A LOOPBACK node gets OVMS's SyncSetInputStreamHandler (LOOPBACK in a set of its
own) unless the graph names a handler. The script's object is the node's, loaded when the graph
loads and shared by every run; `execute` runs on a worker thread.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from calculators.loopback import LOOPBACK, loopback_sync_sets
from calculators.node_resources import node_servable
from calculators.python.python_calculators_pb2 import PythonExecutorCalculatorOptions
from calculators.python.resources import CALCULATOR, build_python_handler
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from graphruntime.resources import ResourceFactory
from servables.errors import InvalidRequest
from servables.python_model.handler import EXHAUSTED, PythonHandler, PythonNodeError
from servables.python_model.tensor import Tensor

RESOURCES = "PYTHON_NODE_RESOURCES"


@register_calculator
class PythonExecutorCalculator(Calculator):
    options_type = PythonExecutorCalculatorOptions
    resource_factories: ClassVar[dict[str, ResourceFactory]] = {RESOURCES: build_python_handler}

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        if cc.inputs.has_tag(LOOPBACK) != cc.outputs.has_tag(LOOPBACK):
            raise ValueError(
                "If LOOPBACK is used, it must be defined on both input and output of the node"
            )
        for ports in (cc.inputs, cc.outputs):
            if not [tag for tag in ports.tags() if tag != LOOPBACK]:
                raise ValueError(f"{CALCULATOR} needs at least one input and one output stream")
            for tag, index, _ in ports.tag_map.items():
                ports.declare(tag, bool if tag == LOOPBACK else Tensor, index=index)
        cc.input_side_packets.declare(RESOURCES, dict)
        if cc.inputs.has_tag(LOOPBACK):
            cc.set_input_stream_handler("SyncSetInputStreamHandler", loopback_sync_sets())

    def open(self, cc: CalculatorContext) -> None:
        self.handler = node_servable(cc, RESOURCES, PythonHandler, "Python")
        self.label = self.handler.label
        self.inputs = [(t, i, n) for t, i, n in cc.inputs.tag_map.items() if t != LOOPBACK]
        self.outputs = {n: (t, i) for t, i, n in cc.outputs.tag_map.items() if t != LOOPBACK}
        self.generative = cc.outputs.has_tag(LOOPBACK)
        self.generator: Iterator[Any] | None = None
        self.timestamp = 0

    def process(self, cc: CalculatorContext) -> None:
        inputs = self._input_tensors(cc)
        if self.generator is not None:
            if inputs:  # the client's mistake, as OVMS sees it
                raise InvalidRequest(
                    f"{self.label}: the node is already generating for earlier inputs. Create "
                    "a new stream for another request."
                )
            self._generate(cc)
            return
        if not inputs:
            return  # a LOOPBACK packet after its generator ended
        self.timestamp = int(cc.input_timestamp)
        result = self.handler.execute(inputs)
        if isinstance(result, (list, tuple)):
            self._emit(cc, result, "returned", loopback=False)
        elif isinstance(result, Iterator):
            if not self.generative:
                raise PythonNodeError(
                    f"{self.label}: execute yielded, but the node has no LOOPBACK input and "
                    "output (generative mode needs them, on a back edge)"
                )
            self.generator = result
            self._generate(cc)
        else:
            raise PythonNodeError(
                f"{self.label}: execute returned {type(result).__name__}; it must return a list "
                "of pyovms.Tensor, or yield such lists (generative mode)"
            )

    def close(self, cc: CalculatorContext) -> None:
        """A run that ends mid-generation closes the generator (its `finally` blocks run)."""
        generator, self.generator = getattr(self, "generator", None), None
        if generator is not None and hasattr(generator, "close"):
            self.handler.call("closing execute's generator", generator.close)

    def _input_tensors(self, cc: CalculatorContext) -> list[Tensor]:
        tensors = []
        for tag, index, name in self.inputs:
            packet = cc.inputs[tag, index]
            if packet.is_empty():
                continue
            if not isinstance(packet.payload, Tensor):
                raise PythonNodeError(
                    f"{self.label}: input stream {name} carries a "
                    f"{type(packet.payload).__name__}, not a pyovms.Tensor. A graph input "
                    "feeding a Python node needs a tag starting with OVMS_PY_TENSOR; an OpenVINO "
                    "node's output goes through PyTensorOvTensorConverterCalculator first"
                )
            tensors.append(packet.payload)
        return tensors

    def _generate(self, cc: CalculatorContext) -> None:
        assert self.generator is not None
        outputs = self.handler.next_outputs(self.generator)
        if outputs is EXHAUSTED:
            self.generator = None
            return
        if not isinstance(outputs, (list, tuple)):
            raise PythonNodeError(
                f"{self.label}: execute yielded {type(outputs).__name__}; it must yield lists "
                "of pyovms.Tensor"
            )
        self._emit(cc, outputs, "yielded", loopback=True)

    def _emit(
        self, cc: CalculatorContext, tensors: Sequence[Any], verb: str, *, loopback: bool
    ) -> None:
        ports = []
        for position, tensor in enumerate(tensors):
            if not isinstance(tensor, Tensor):
                raise PythonNodeError(
                    f"{self.label}: execute {verb} a list holding {type(tensor).__name__} at "
                    f"position {position}; it must hold pyovms.Tensor"
                )
            port = self.outputs.get(tensor.name)
            if port is None:
                raise PythonNodeError(
                    f"{self.label}: execute {verb} a tensor named {tensor.name!r}, which is not "
                    f"an output stream of the node (outputs: {', '.join(self.outputs)})"
                )
            if port in ports:
                raise PythonNodeError(
                    f"{self.label}: execute {verb} two tensors named {tensor.name!r}; one "
                    "output stream takes one packet per timestamp"
                )
            ports.append(port)
        for port, tensor in zip(ports, tensors, strict=True):
            cc.outputs[port].add(tensor, self.timestamp)
        if loopback:
            self.timestamp += 1
            cc.outputs[LOOPBACK].add(True, self.timestamp)
