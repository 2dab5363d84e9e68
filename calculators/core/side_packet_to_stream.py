"""SidePacketToStreamCalculator: emit side packets as single stream packets.

    node {
      calculator: "SidePacketToStreamCalculator"
      input_side_packet: "model_name"
      output_stream: "AT_PRESTREAM:model_name_stream"    # or AT_POSTSTREAM / AT_ZERO
    }

Lets stream-driven nodes consume a value given at start_run. Side packet i goes to output i.
"""

from __future__ import annotations

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    StatusStop,
    register_calculator,
)
from graphruntime.timestamp import POSTSTREAM, PRESTREAM

TIMESTAMPS = {"AT_PRESTREAM": PRESTREAM, "AT_POSTSTREAM": POSTSTREAM, "AT_ZERO": 0}


@register_calculator
class SidePacketToStreamCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        tags = cc.outputs.tags()
        if len(tags) != 1 or tags[0] not in TIMESTAMPS:
            raise ValueError(
                "SidePacketToStreamCalculator needs exactly one output tag among "
                + ", ".join(TIMESTAMPS)
            )
        if cc.outputs.count(tags[0]) != len(cc.input_side_packets):
            raise ValueError(
                "SidePacketToStreamCalculator: give as many outputs as input side packets."
            )
        cc.outputs.declare_all()
        cc.input_side_packets.declare_all()

    def open(self, cc: CalculatorContext) -> None:
        tag = cc.outputs.tag_map.tags()[0]
        for flat_id in range(len(cc.input_side_packets)):
            packet = cc.input_side_packets[flat_id]
            output = cc.outputs[(tag, flat_id)]
            if not packet.is_empty():
                output.add_packet(packet.at(TIMESTAMPS[tag]))
            output.close()

    def process(self, cc: CalculatorContext) -> None:
        # A source with nothing more to emit: stop, or the run would never end (as MediaPipe).
        raise StatusStop()
