"""PreviousLoopbackCalculator: pair each MAIN packet with the LOOP packet of the previous one.

    node {
      calculator: "PreviousLoopbackCalculator"
      input_stream: "MAIN:frames"
      input_stream: "LOOP:detections"
      input_stream_info: { tag_index: "LOOP" back_edge: true }
      output_stream: "PREV_LOOP:prev_detections"
    }

The classic way to feed a node's own earlier result back to it (tracking, smoothing). LOOP is a
back edge; PREV_LOOP at MAIN timestamp t carries the LOOP packet that was produced for the
previous MAIN timestamp (nothing, but an advanced bound, for the first one). Runs under the
Immediate handler and processes timestamp bounds, which is what keeps the cycle from deadlocking.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from graphruntime import (
    Calculator,
    CalculatorContext,
    CalculatorContract,
    Packet,
    register_calculator,
)
from graphruntime.timestamp import DONE, UNSET, UNSTARTED, previous_allowed_in_stream

_LAST_ALLOWED = previous_allowed_in_stream(DONE)


@register_calculator
class PreviousLoopbackCalculator(Calculator):
    blocking = False

    @classmethod
    def get_contract(cls, cc: CalculatorContract) -> None:
        cc.inputs.declare("MAIN")
        cc.inputs.declare("LOOP")
        cc.outputs.declare("PREV_LOOP")
        cc.set_input_stream_handler("ImmediateInputStreamHandler")
        cc.set_process_timestamp_bounds(True)

    def open(self, cc: CalculatorContext) -> None:
        # (MAIN timestamp, timestamp of the LOOP packet that answers it)
        self.main_specs: deque[tuple[int, int]] = deque()
        self.prev_main = UNSTARTED
        self.prev_non_empty_main = UNSTARTED
        self.loop_packets: deque[Packet[Any]] = deque()
        self.prev_loop = UNSET

    def process(self, cc: CalculatorContext) -> None:
        main = cc.inputs["MAIN"]
        main_ts = int(main.timestamp)
        if self.prev_main < main_ts:
            if not main.is_empty():
                loop_ts = self.prev_non_empty_main
                self.prev_non_empty_main = main_ts
            else:
                loop_ts = UNSET
            self.main_specs.append((main_ts, loop_ts))
            self.prev_main = main_ts
        loop = cc.inputs["LOOP"]
        if self.prev_loop < int(loop.timestamp):
            self.loop_packets.append(loop)
            self.prev_loop = int(loop.timestamp)

        output = cc.outputs["PREV_LOOP"]
        while self.main_specs and self.loop_packets:
            main_spec_ts, expected_loop_ts = self.main_specs[0]
            candidate = self.loop_packets[0]
            if expected_loop_ts < int(candidate.timestamp):
                output.set_next_timestamp_bound(main_spec_ts + 1)
                self.main_specs.popleft()
            elif expected_loop_ts > int(candidate.timestamp):
                self.loop_packets.popleft()
            else:
                if candidate.is_empty():
                    output.set_next_timestamp_bound(main_spec_ts + 1)
                elif output.next_timestamp_bound != DONE:
                    output.add_packet(candidate.at(main_spec_ts))
                self.loop_packets.popleft()
                self.main_specs.popleft()
            if main_spec_ts == _LAST_ALLOWED:
                output.close()
