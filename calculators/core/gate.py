"""GateCalculator: pass input packets only while the gate is open.

    node {
      calculator: "GateCalculator"
      input_stream: "frames"
      input_stream: "ALLOW:enabled"        # or DISALLOW:..., or an ALLOW/DISALLOW side packet
      output_stream: "gated_frames"
      output_stream: "STATE_CHANGE:gate_changes"   # optional: true/false when the state flips
    }

With an ALLOW (or DISALLOW) stream, the bool packet at each timestamp decides; an empty packet
counts as disallow unless `empty_packets_as_allow`. With a side packet the gate is fixed for the
run; with neither, `GateCalculatorOptions.allow` decides. Dropped timestamps still advance the
outputs' bounds, so downstream nodes never wait for them.
"""

from __future__ import annotations

from calculators.core.gate_calculator_pb2 import GateCalculatorOptions
from graphruntime import Calculator, CalculatorContext, CalculatorContract, register_calculator

ALLOW = "ALLOW"
DISALLOW = "DISALLOW"
STATE_CHANGE = "STATE_CHANGE"


@register_calculator
class GateCalculator(Calculator):
    options_type = GateCalculatorOptions
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        by_side_packet = cc.input_side_packets.has_tag(ALLOW) or cc.input_side_packets.has_tag(
            DISALLOW
        )
        by_stream = cc.inputs.has_tag(ALLOW) or cc.inputs.has_tag(DISALLOW)
        if by_side_packet and by_stream:
            raise ValueError(
                "GateCalculator: give ALLOW/DISALLOW as a stream or a side packet, not both."
            )
        for ports in (cc.inputs, cc.input_side_packets):
            if ports.has_tag(ALLOW) and ports.has_tag(DISALLOW):
                raise ValueError("GateCalculator: use ALLOW or DISALLOW, not both.")
            for tag in (ALLOW, DISALLOW):
                if ports.has_tag(tag):
                    ports.declare(tag, bool)
        data_inputs = cc.inputs.count("")
        if cc.outputs.count("") != data_inputs:
            raise ValueError(
                "GateCalculator: the number of data (untagged) outputs must match the data inputs."
            )
        cc.inputs.declare_all(tag="")
        cc.outputs.declare_all(tag="")
        if cc.outputs.has_tag(STATE_CHANGE):
            cc.outputs.declare(STATE_CHANGE, bool)
        cc.set_timestamp_offset(0)

    def open(self, cc: CalculatorContext) -> None:
        options = cc.options(GateCalculatorOptions)
        self.empty_as_allow = options.empty_packets_as_allow
        self.fixed: bool | None = None
        for tag, meaning in ((ALLOW, True), (DISALLOW, False)):
            if cc.input_side_packets.has_tag(tag):
                packet = cc.input_side_packets[tag]
                value = self.empty_as_allow if packet.is_empty() else bool(packet.payload)
                self.fixed = value if meaning else not value
        if self.fixed is None and not (cc.inputs.has_tag(ALLOW) or cc.inputs.has_tag(DISALLOW)):
            self.fixed = options.allow
        initial = options.initial_gate_state
        self.last_state: bool | None = (
            True
            if initial == GateCalculatorOptions.GATE_ALLOW
            else False
            if initial == GateCalculatorOptions.GATE_DISALLOW
            else None
        )

    def _allowed(self, cc: CalculatorContext) -> bool:
        if self.fixed is not None:
            return self.fixed
        tag, meaning = (ALLOW, True) if cc.inputs.has_tag(ALLOW) else (DISALLOW, False)
        packet = cc.inputs[tag]
        value = self.empty_as_allow if packet.is_empty() else bool(packet.payload)
        return value if meaning else not value

    def process(self, cc: CalculatorContext) -> None:
        allowed = self._allowed(cc)
        if (
            cc.outputs.has_tag(STATE_CHANGE)
            and self.last_state is not None
            and allowed != self.last_state
        ):
            cc.outputs[STATE_CHANGE].add(allowed)
        self.last_state = allowed
        if not allowed:
            return
        data = cc.inputs.tag_map
        for index in range(data.count("")):
            packet = cc.inputs[("", index)]
            if not packet.is_empty():
                cc.outputs[("", index)].add_packet(packet)
