"""GatherCalculator: stack the branches a DemultiplexCalculator opened into one tensor again.

    node {
      name: "classifier:gather"
      calculator: "GatherCalculator"
      input_stream: "TENSOR:0:scores"            output_stream: "TENSOR:0:all_scores"
      input_stream: "BATCH_END:detector_end"
    }

OVMS's gathering (`gather_from_node`, or the response's gathering of every branch nobody else
gathered): the results of the N branches are stacked along a new first dimension, in branch
order, and sent at the timestamp the demultiplexed input had (BATCH_END's payload), so the
nodes after it see one packet per request again. Input i's stack goes to output i. Branches
whose tensors differ in shape cannot be stacked: OVMS's "Gathered tensor shards dimensions are
different", as a client error naming the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calculators.dag.demultiplex import BATCH_END, TENSOR, check_same_ports
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator
from servables.errors import InvalidRequest


@register_calculator
class GatherCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        check_same_ports(cc, "GatherCalculator")
        if cc.inputs.count(BATCH_END) != 1 or set(cc.outputs.tags()) != {TENSOR}:
            raise ValueError("GatherCalculator needs one BATCH_END input and TENSOR outputs")
        cc.inputs.declare_all()
        cc.outputs.declare_all()

    def open(self, cc: CalculatorContext) -> None:
        self.node = cc.node_name.removesuffix(":gather")
        self.shards: list[list[Any]] = [[] for _ in range(cc.inputs.tag_map.count(TENSOR))]

    def process(self, cc: CalculatorContext) -> None:
        packets = [cc.inputs[TENSOR, index] for index in range(len(self.shards))]
        present = [not packet.is_empty() for packet in packets]
        if any(present):
            if not all(present):
                raise ValueError(
                    f"Node {self.node}: a branch at {cc.input_timestamp} has some tensors to "
                    "gather but not all"
                )
            for shards, packet in zip(self.shards, packets, strict=True):
                shards.append(np.asarray(packet.payload))
        end = cc.inputs[BATCH_END, 0]
        if end.is_empty():
            return
        for index, shards in enumerate(self.shards):
            shapes = {shard.shape for shard in shards}
            if len(shapes) > 1:
                raise InvalidRequest(
                    f"Node {self.node}: gathered tensor shards dimensions are different: "
                    + ", ".join(str(list(shape)) for shape in sorted(shapes))
                )
            cc.outputs[TENSOR, index].add(np.stack(shards), end.payload)
            shards.clear()
