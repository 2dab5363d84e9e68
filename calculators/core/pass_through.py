"""PassThroughCalculator: forwards every input packet and side packet unchanged.

    node {
      calculator: "PassThroughCalculator"
      input_stream: "in"            input_stream: "VIDEO:frames"
      output_stream: "out"          output_stream: "VIDEO:frames_copy"
    }

Input i goes to output i (matching tags and indexes), as do side packets. The timestamp offset of
0 lets downstream nodes advance even at timestamps where nothing arrives.
"""

from __future__ import annotations

from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator


@register_calculator
class PassThroughCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        if not (
            cc.inputs.tag_map.same_layout(cc.outputs.tag_map)
            and cc.input_side_packets.tag_map.same_layout(cc.output_side_packets.tag_map)
        ):
            raise ValueError(
                "Input and output streams to PassThroughCalculator must use matching tags and "
                "indexes."
            )
        cc.inputs.declare_all()
        cc.outputs.declare_all()
        cc.input_side_packets.declare_all()
        cc.output_side_packets.declare_all()
        cc.set_timestamp_offset(0)

    def open(self, cc: CalculatorContext) -> None:
        for flat_id in range(len(cc.input_side_packets)):
            cc.output_side_packets.set(flat_id, cc.input_side_packets[flat_id])

    def process(self, cc: CalculatorContext) -> None:
        # Inputs and outputs share their layout (get_contract), so flat ids pair up. The plain
        # lists rather than `zip(cc.inputs, cc.outputs, strict=True)`, and one stream without a
        # zip: this is a whole node hop's work in MediaPipe's benchmark chains, and that zip
        # (two Python __iter__ calls, and strict's end check) was a third of the hop
        # (benchmarks/graph_passthrough.py).
        packets = cc.inputs.packets
        handles = cc.outputs.handles
        if len(packets) == 1:
            packet = packets[0]
            if not packet.is_empty():
                handles[0].add_packet(packet)
            return
        for packet, output in zip(packets, handles, strict=True):
            if not packet.is_empty():
                output.add_packet(packet)
