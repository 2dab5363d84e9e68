"""DemultiplexCalculator: split tensors along their first dimension into branches (OVMS's DAGs).

    node {
      name: "detector:demultiply"
      calculator: "DemultiplexCalculator"
      input_stream: "TENSOR:0:boxes"            output_stream: "TENSOR:0:box"
      input_stream: "TENSOR:1:crops"            output_stream: "TENSOR:1:crop"
      output_stream: "BATCH_END:detector_end"
      node_options: {
        [type.googleapis.com/graphrt.DemultiplexCalculatorOptions]: { demultiply_count: 3 }
      }
    }

OVMS's `demultiply_count` on a pipeline node runs the nodes after it once per slice of its
outputs (`docs/demultiplexing.md`). In a graph that is MediaPipe's loop idiom
(BeginLoopCalculator / EndLoopCalculator): the N slices of each input go out as N packets at
consecutive timestamps of the branch (this node's own counter, not the input's timestamp), so
every node downstream runs once per slice, and a BATCH_END packet at the last slice's timestamp
carries the input's timestamp to GatherCalculator, which stacks the results at that timestamp
again. Slices are views of the input (no copy). The slices of input i go to output i.

OVMS's run-time rules are kept, with its messages' substance: every tensor needs at least 3
dimensions (a slice keeps a batch dimension), all share their first dimension, which must equal
`demultiply_count` unless that is -1, at most 10,000 slices, and none (a dynamic count of 0) is
an error rather than an empty answer.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calculators.dag.dag_calculators_pb2 import DemultiplexCalculatorOptions
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.errors import InvalidRequest

TENSOR = "TENSOR"
BATCH_END = "BATCH_END"
DEMULTIPLY_LIMIT = 10_000  # OVMS's largest demultiply_count
MIN_DIMENSIONS = 3


def check_same_ports(cc: CalculatorContract, calculator: str) -> None:
    """Inputs and outputs are TENSOR:i pairs (a node splits or stacks each of its streams)."""
    if cc.inputs.count(TENSOR) == 0 or cc.inputs.count(TENSOR) != cc.outputs.count(TENSOR):
        raise ValueError(f"{calculator} needs as many TENSOR outputs as TENSOR inputs (at least 1)")


@register_calculator
class DemultiplexCalculator(Calculator):
    options_type = DemultiplexCalculatorOptions
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        check_same_ports(cc, "DemultiplexCalculator")
        if cc.outputs.count(BATCH_END) != 1 or set(cc.inputs.tags()) != {TENSOR}:
            raise ValueError(
                "DemultiplexCalculator takes TENSOR inputs and needs one BATCH_END output"
            )
        cc.inputs.declare_all()
        cc.outputs.declare_all()

    def open(self, cc: CalculatorContext) -> None:
        self.count = cc.options(DemultiplexCalculatorOptions).demultiply_count
        self.node = cc.node_name.removesuffix(":demultiply")
        self.next_timestamp = 0  # the branches' timestamps, across every input of the run

    def _slices(self, cc: CalculatorContext) -> tuple[list[Any], int]:
        arrays: list[Any] = []
        for index in range(cc.inputs.tag_map.count(TENSOR)):
            packet = cc.inputs[TENSOR, index]
            if packet.is_empty():
                raise InvalidRequest(
                    f"Node {self.node}: output {index} has no tensor to demultiply at "
                    f"{cc.input_timestamp}"
                )
            arrays.append(np.asarray(packet.payload))
        shards = arrays[0].shape[0] if arrays[0].ndim else 0
        for array in arrays:
            if array.dtype.kind in "OSU":
                raise InvalidRequest(
                    f"Node {self.node}: demultiplication is not supported for string precision"
                )
            if array.ndim < MIN_DIMENSIONS:
                raise InvalidRequest(
                    f"Node {self.node}: wrong number of dimensions {array.ndim} of a tensor to "
                    f"demultiply (shape {list(array.shape)}); it must be at least "
                    f"{MIN_DIMENSIONS}"
                )
            if self.count != -1 and array.shape[0] != self.count:
                raise InvalidRequest(
                    f"Node {self.node}: wrong dim[0] size {array.shape[0]} of a tensor of shape "
                    f"{list(array.shape)}; demultiply_count is {self.count}"
                )
            if array.shape[0] != shards:
                raise InvalidRequest(
                    f"Node {self.node}: tensors to demultiply differ in their first dimension "
                    f"({shards} and {array.shape[0]})"
                )
        if shards > DEMULTIPLY_LIMIT:
            raise InvalidRequest(
                f"Node {self.node}: too large dim[0] size {shards} to demultiply; at most "
                f"{DEMULTIPLY_LIMIT}"
            )
        if shards == 0:
            raise InvalidRequest(
                f"Pipeline execution aborted: node {self.node} produced no results to demultiply"
            )
        return arrays, shards

    def process(self, cc: CalculatorContext) -> None:
        arrays, shards = self._slices(cc)
        first = self.next_timestamp
        for shard in range(shards):
            for index, array in enumerate(arrays):
                cc.outputs[TENSOR, index].add(array[shard], first + shard)
        self.next_timestamp = first + shards
        cc.outputs[BATCH_END, 0].add(int(cc.input_timestamp), first + shards - 1)
