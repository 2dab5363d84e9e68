"""Core calculators: PassThrough, Gate, Mux, SidePacketToStream, PreviousLoopback."""

from __future__ import annotations

from typing import Any

import pytest

from graphruntime import (
    Graph,
    GraphRunError,
    GraphValidationError,
    Packet,
    Timestamp,
    ValidatedGraph,
)

Item = tuple[Any, int]


async def run(
    text: str,
    feeds: list[tuple[str, Any, int]],
    outputs: list[str],
    side_packets: dict[str, Any] | None = None,
) -> dict[str, list[Item]]:
    """Feeds (stream, payload, timestamp) in order, closes the inputs, collects outputs."""
    graph = Graph(text)
    got: dict[str, list[Item]] = {name: [] for name in outputs}
    for name in outputs:
        graph.observe_output_stream(name, lambda n, p: got[n].append((p.payload, int(p.timestamp))))
    await graph.start_run(side_packets or {})
    for stream, payload, timestamp in feeds:
        await graph.add_packet(stream, Packet(payload, timestamp))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return got


# ------------------------------------------------------------------------------ PassThrough


async def test_pass_through_maps_input_i_to_output_i() -> None:
    got = await run(
        """
        input_stream: "a"
        input_stream: "b"
        input_stream: "v"
        node {
          calculator: "PassThroughCalculator"
          input_stream: "a" input_stream: "b" input_stream: "VIDEO:v"
          output_stream: "a_out" output_stream: "b_out" output_stream: "VIDEO:v_out"
        }
        """,
        [("a", "a0", 0), ("v", "v0", 0), ("b", "b1", 1)],
        ["a_out", "b_out", "v_out"],
    )
    assert got == {"a_out": [("a0", 0)], "b_out": [("b1", 1)], "v_out": [("v0", 0)]}


# ------------------------------------------------------------------------------------- Gate

GATE_STREAM = """
input_stream: "in"
input_stream: "control"
node {
  calculator: "GateCalculator"
  input_stream: "in"
  input_stream: "%s:control"
  output_stream: "out"
  output_stream: "STATE_CHANGE:changes"
  %s
}
"""


async def test_gate_allow_stream() -> None:
    feeds: list[tuple[str, Any, int]] = []
    for t, allow in enumerate([True, False, False, True, True]):
        feeds += [("in", f"p{t}", t), ("control", allow, t)]
    got = await run(GATE_STREAM % ("ALLOW", ""), feeds, ["out", "changes"])
    assert got["out"] == [("p0", 0), ("p3", 3), ("p4", 4)]
    # State changes only on flips; the first packet sets the state without reporting it.
    assert got["changes"] == [(False, 1), (True, 3)]


async def test_gate_disallow_stream() -> None:
    feeds: list[tuple[str, Any, int]] = []
    for t, disallow in enumerate([True, False]):
        feeds += [("in", t, t), ("control", disallow, t)]
    got = await run(GATE_STREAM % ("DISALLOW", ""), feeds, ["out", "changes"])
    assert got["out"] == [(1, 1)]
    assert got["changes"] == [(True, 1)]


async def test_gate_missing_control_packet_counts_as_disallow_unless_configured() -> None:
    feeds: list[tuple[str, Any, int]] = [("in", "x", 0), ("control", True, 1)]
    got = await run(GATE_STREAM % ("ALLOW", ""), feeds, ["out"])
    assert got["out"] == []
    options = """node_options: {
      [type.googleapis.com/mediapipe.GateCalculatorOptions] { empty_packets_as_allow: true }
    }"""
    got = await run(GATE_STREAM % ("ALLOW", options), feeds, ["out"])
    assert got["out"] == [("x", 0)]


async def test_gate_initial_state_reports_the_first_change() -> None:
    options = """options {
      [mediapipe.GateCalculatorOptions.ext] { initial_gate_state: GATE_ALLOW }
    }"""
    feeds: list[tuple[str, Any, int]] = [("in", 0, 0), ("control", False, 0)]
    got = await run(GATE_STREAM % ("ALLOW", options), feeds, ["changes"])
    assert got["changes"] == [(False, 0)]


GATE_SIDE = """
input_stream: "in"
node {
  calculator: "GateCalculator"
  input_stream: "in"
  input_side_packet: "%s:flag"
  output_stream: "out"
}
"""


@pytest.mark.parametrize(
    ("tag", "flag", "passes"),
    [
        ("ALLOW", True, True),
        ("ALLOW", False, False),
        ("DISALLOW", True, False),
        ("DISALLOW", False, True),
    ],
)
async def test_gate_side_packet_fixes_the_gate_for_the_run(
    tag: str, flag: bool, passes: bool
) -> None:
    feeds: list[tuple[str, Any, int]] = [("in", t, t) for t in range(3)]
    got = await run(GATE_SIDE % tag, feeds, ["out"], {"flag": flag})
    assert got["out"] == ([(t, t) for t in range(3)] if passes else [])


async def test_gate_without_control_uses_the_allow_option() -> None:
    text = """
    input_stream: "in"
    node { calculator: "GateCalculator" input_stream: "in" output_stream: "out" %s }
    """
    feeds: list[tuple[str, Any, int]] = [("in", "x", 0)]
    assert (await run(text % "", feeds, ["out"]))["out"] == []  # allow defaults to false
    allow = """options { [mediapipe.GateCalculatorOptions.ext] { allow: true } }"""
    assert (await run(text % allow, feeds, ["out"]))["out"] == [("x", 0)]


async def test_gate_with_several_data_streams() -> None:
    got = await run(
        """
        input_stream: "a"
        input_stream: "b"
        input_stream: "allow"
        node { calculator: "GateCalculator" input_stream: "a" input_stream: "b"
               input_stream: "ALLOW:allow" output_stream: "a_out" output_stream: "b_out" }
        """,
        [("a", "a0", 0), ("b", "b0", 0), ("allow", True, 0), ("a", "a1", 1), ("allow", False, 1)],
        ["a_out", "b_out"],
    )
    assert got == {"a_out": [("a0", 0)], "b_out": [("b0", 0)]}


@pytest.mark.parametrize(
    ("ports", "message"),
    [
        ('input_stream: "ALLOW:x" input_stream: "DISALLOW:y"', "use ALLOW or DISALLOW, not both"),
        (
            'input_stream: "ALLOW:x" input_side_packet: "ALLOW:s"',
            "as a stream or a side packet, not both",
        ),
        ('output_stream: "extra"', "number of data (untagged) outputs must match"),
    ],
)
def test_gate_contract_errors(ports: str, message: str) -> None:
    with pytest.raises(GraphValidationError) as caught:
        ValidatedGraph.from_config(
            f"""
            input_stream: "in" input_stream: "x" input_stream: "y"
            node {{ calculator: "GateCalculator" input_stream: "in" output_stream: "out" {ports} }}
            """
        )
    assert len(caught.value.issues) == 1
    assert caught.value.issues[0].message.startswith("GateCalculator: ")
    assert message in caught.value.issues[0].message


# -------------------------------------------------------------------------------------- Mux

MUX = """
input_stream: "a"
input_stream: "b"
input_stream: "select"
node {
  calculator: "MuxCalculator"
  input_stream: "INPUT:0:a"
  input_stream: "INPUT:1:b"
  input_stream: "SELECT:select"
  output_stream: "OUTPUT:out"
}
"""


async def test_mux_selects_per_timestamp() -> None:
    feeds: list[tuple[str, Any, int]] = []
    for t, choice in enumerate([0, 1, 1, 0]):
        feeds += [("a", f"a{t}", t), ("b", f"b{t}", t), ("select", choice, t)]
    got = await run(MUX, feeds, ["out"])
    assert got["out"] == [("a0", 0), ("b1", 1), ("b2", 2), ("a3", 3)]


async def test_mux_does_not_wait_for_unselected_inputs() -> None:
    graph = Graph(MUX)
    out: list[Item] = []
    graph.observe_output_stream("out", lambda _, p: out.append((p.payload, int(p.timestamp))))
    await graph.start_run()
    for t in range(3):
        await graph.add_packet("a", Packet(f"a{t}", t))
        await graph.add_packet("select", Packet(0, t))
    await graph.wait_until_idle()
    # b never moved, yet every timestamp went through.
    assert out == [("a0", 0), ("a1", 1), ("a2", 2)]
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_mux_selected_input_without_packet_outputs_nothing() -> None:
    feeds: list[tuple[str, Any, int]] = [("b", "b5", 5), ("select", 0, 3), ("select", 1, 5)]
    got = await run(MUX, feeds, ["out"])
    assert got["out"] == [("b5", 5)]


async def test_mux_rejects_a_bad_select_value() -> None:
    graph = Graph(MUX)
    await graph.start_run()
    await graph.add_packet("select", Packet(7, 0))
    graph.close_all_packet_sources()
    with pytest.raises(GraphRunError, match=r"control packet on \"select\" must be an int"):
        await graph.wait_until_done()


def test_mux_contract_needs_inputs_and_select() -> None:
    with pytest.raises(GraphValidationError, match="MuxCalculator needs INPUT"):
        ValidatedGraph.from_config(
            """
            input_stream: "a" input_stream: "s"
            node { calculator: "MuxCalculator" input_stream: "INPUT:0:a" input_stream: "SELECT:s"
                   input_stream: "extra" output_stream: "OUTPUT:o" }
            """
        )


# ----------------------------------------------------------------------- SidePacketToStream


@pytest.mark.parametrize(
    ("tag", "timestamp"),
    [
        ("AT_PRESTREAM", Timestamp.PRESTREAM),
        ("AT_POSTSTREAM", Timestamp.POSTSTREAM),
        ("AT_ZERO", 0),
    ],
)
async def test_side_packet_to_stream(tag: str, timestamp: int) -> None:
    graph = Graph(
        f"""
        node {{ calculator: "SidePacketToStreamCalculator"
               input_side_packet: "first" input_side_packet: "second"
               output_stream: "{tag}:0:one" output_stream: "{tag}:1:two" }}
        """
    )
    got: list[tuple[str, Any, int]] = []
    for name in ("one", "two"):
        graph.observe_output_stream(name, lambda n, p: got.append((n, p.payload, p.timestamp)))
    # The node is a source: it stops by itself, so run() returns.
    await graph.run({"first": "model", "second": 7})
    assert sorted(got) == [("one", "model", timestamp), ("two", 7, timestamp)]


async def test_side_packet_to_stream_feeds_a_stream_consumer() -> None:
    graph = Graph(
        """
        node { calculator: "SidePacketToStreamCalculator" input_side_packet: "model"
               output_stream: "AT_PRESTREAM:model_stream" }
        node { calculator: "PassThroughCalculator" input_stream: "model_stream"
               output_stream: "out" }
        """
    )
    poller = graph.poll_output_stream("out")
    await graph.run({"model": "m"})
    assert [(p.payload, p.timestamp) async for p in poller] == [("m", Timestamp.PRESTREAM)]


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        ('output_stream: "AT_ZERO:a" output_stream: "AT_PRESTREAM:b"', "exactly one output tag"),
        ('output_stream: "AT_NOON:a"', "exactly one output tag"),
        (
            'output_stream: "AT_ZERO:0:a" output_stream: "AT_ZERO:1:b"',
            "as many outputs as input side packets",
        ),
    ],
)
def test_side_packet_to_stream_contract(outputs: str, message: str) -> None:
    with pytest.raises(GraphValidationError, match=message):
        ValidatedGraph.from_config(
            f"""node {{ calculator: "SidePacketToStreamCalculator" input_side_packet: "x"
                       {outputs} }}"""
        )


# ------------------------------------------------------------------------ PreviousLoopback


async def test_previous_loopback_pairs_each_main_with_the_previous_loop_packet() -> None:
    # LOOP is fed from outside here, standing in for the node that closes the cycle.
    graph = Graph(
        """
        input_stream: "main"
        input_stream: "loop"
        node {
          calculator: "PreviousLoopbackCalculator"
          input_stream: "MAIN:main"
          input_stream: "LOOP:loop"
          input_stream_info: { tag_index: "LOOP" back_edge: true }
          output_stream: "PREV_LOOP:prev"
        }
        """
    )
    seen: list[tuple[Any, int]] = []
    graph.observe_output_stream(
        "prev",
        lambda _, p: seen.append((None if p.is_empty() else p.payload, int(p.timestamp))),
        observe_timestamp_bounds=True,
    )
    await graph.start_run()
    await graph.add_packet("main", Packet("m", 10))
    await graph.wait_until_idle()
    # Nothing came before 10: only the bound moves past it.
    assert seen == [(None, 10)]
    await graph.add_packet("loop", Packet("result10", 10))
    await graph.add_packet("main", Packet("m", 20))
    await graph.wait_until_idle()
    # LOOP is processed first (timestamp 10), when MAIN is only settled up to 19: the bound moves
    # to 19, then MAIN at 20 gets the loop packet of 10, restamped.
    assert seen[1:] == [(None, 19), ("result10", 20)]
    # No LOOP packet for 20 (its bound moves on): PREV_LOOP at 30 is empty, only a bound.
    graph.set_input_stream_timestamp_bound("loop", 21)
    await graph.add_packet("main", Packet("m", 30))
    await graph.wait_until_idle()
    assert seen[3:] == [(None, 29), (None, 30)]
    graph.close_all_packet_sources()
    await graph.wait_until_done()
