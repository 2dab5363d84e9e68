"""MuxCalculator: at each timestamp, forward the input that SELECT chooses.

    node {
      calculator: "MuxCalculator"
      input_stream: "INPUT:0:camera_a"
      input_stream: "INPUT:1:camera_b"
      input_stream: "SELECT:which"        # int packets: 0 or 1
      output_stream: "OUTPUT:frames"
    }

Runs under MuxInputStreamHandler, so only the selected input must have data at a timestamp;
packets of the other inputs at timestamps SELECT has passed are dropped.
"""

from __future__ import annotations

from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator


@register_calculator
class MuxCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare_all(tag="INPUT")
        cc.inputs.declare("SELECT", int)
        cc.outputs.declare("OUTPUT")
        if cc.inputs.count("INPUT") < 1 or len(cc.inputs) != cc.inputs.count("INPUT") + 1:
            raise ValueError("MuxCalculator needs INPUT:0..n-1 and SELECT input streams only.")
        cc.set_input_stream_handler("MuxInputStreamHandler")
        cc.set_timestamp_offset(0)

    def process(self, cc: CalculatorContext) -> None:
        select = cc.inputs["SELECT"]
        if select.is_empty():
            return
        packet = cc.inputs[("INPUT", select.payload)]
        if not packet.is_empty():
            cc.outputs["OUTPUT"].add_packet(packet)
