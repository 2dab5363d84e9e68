"""Graph validation: MediaPipe's rules and messages, each pointing at the right line."""

from __future__ import annotations

import logging
from typing import Any

import pytest

import calculators.core.gate_calculator_pb2  # noqa: F401 - puts GateCalculatorOptions in the pool
from graphruntime import (
    Calculator,
    CalculatorContext,
    Graph,
    GraphUsageError,
    GraphValidationError,
    Input,
    InputSidePacket,
    Output,
    OutputSidePacket,
    ValidatedGraph,
    parse_graph_config,
    register_calculator,
)
from graphruntime.node_checks import NOT_A_SUBGRAPH

PATH = "g.pbtxt"


@register_calculator(name="TestValidationInOutCalculator")
class InOut(Calculator):
    blocking = False
    source = Input("IN", int)
    sink = Output("OUT", int)

    def process(self, cc: CalculatorContext) -> None:
        cc.outputs[self.sink].add(cc.inputs[self.source].payload)


@register_calculator(name="TestValidationStrSinkCalculator")
class StrSink(Calculator):
    blocking = False
    text = Input("IN", str)


@register_calculator(name="TestValidationSideCalculator")
class SideUser(Calculator):
    blocking = False
    model: InputSidePacket[Any] = InputSidePacket("MODEL")
    made: OutputSidePacket[Any] = OutputSidePacket("MADE", optional=True)


def issues(text: str) -> list[tuple[str, str]]:
    """(message, "path:line") of every issue; fails if the graph validates."""
    with pytest.raises(GraphValidationError) as caught:
        ValidatedGraph.from_config(parse_graph_config(text, PATH))
    return [(issue.message, str(issue.location)) for issue in caught.value.issues]


def test_valid_graph_has_nodes_in_topological_order() -> None:
    graph = ValidatedGraph.from_config(
        parse_graph_config(
            """
            input_stream: "in"
            node { name: "b" calculator: "PassThroughCalculator" input_stream: "mid"
                   output_stream: "out" }
            node { name: "a" calculator: "PassThroughCalculator" input_stream: "in"
                   output_stream: "mid" }
            """,
            PATH,
        )
    )
    assert [node.name for node in graph.nodes] == ["a", "b"]
    assert [node.index for node in graph.nodes] == [0, 1]
    assert graph.producers["out"] == (1, 0)
    assert graph.consumers["mid"] == ((1, 0),)


def test_unknown_calculator_suggests_a_close_name() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThruCalculator"
  input_stream: "in"
}
"""
    )
    assert found == [
        (
            'Unable to find Calculator "PassThruCalculator"; did you mean "PassThroughCalculator"?'
            + NOT_A_SUBGRAPH,
            "g.pbtxt:3",
        ),
    ]


def test_unknown_calculator_without_close_name_has_no_suggestion() -> None:
    found = issues('node {\n  calculator: "Zzqxjvw"\n}\n')
    assert found == [('Unable to find Calculator "Zzqxjvw"' + NOT_A_SUBGRAPH, "g.pbtxt:2")]


def test_unknown_input_stream_handler() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  input_stream_handler {
    input_stream_handler: "NoSuchHandler"
  }
}
"""
    )
    assert found == [('"NoSuchHandler" is not a registered input stream handler.', "g.pbtxt:6")]


def test_unknown_graph_level_input_stream_handler_points_at_the_graph_field() -> None:
    found = issues(
        """\
input_stream: "in"
input_stream_handler { input_stream_handler: "NoSuchHandler" }
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out" }
"""
    )
    assert found == [('"NoSuchHandler" is not a registered input stream handler.', "g.pbtxt:2")]


def test_input_without_producer() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "mid"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "mid"
  input_stream: "nowhere"
  output_stream: "out"
  output_stream: "out2"
}
"""
    )
    assert found == [
        (
            'Input Stream "nowhere" for node with sorted index 1 name PassThroughCalculator_2 does '
            "not have a corresponding output stream.",
            "g.pbtxt:10",
        ),
    ]


def test_stream_produced_by_two_nodes() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
}
"""
    )
    assert found == [('Output Stream "out" defined twice.', "g.pbtxt:10")]


def test_graph_input_also_produced_by_a_node() -> None:
    found = issues(
        """\
input_stream: "in"
input_stream: "x"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "x"
}
"""
    )
    assert found == [('Output Stream "x" defined twice.', "g.pbtxt:6")]


def test_cycle_without_back_edge() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  name: "first"
  calculator: "PassThroughCalculator"
  input_stream: "b"
  output_stream: "a"
}
node {
  name: "second"
  calculator: "PassThroughCalculator"
  input_stream: "a"
  output_stream: "b"
}
"""
    )
    assert len(found) == 1
    message, location = found[0]
    assert message.startswith(
        "Generator side packet cycle or calculator stream cycle detected in graph: [first, second]"
    )
    assert location == "g.pbtxt:2"


def test_self_loop_needs_a_back_edge_too() -> None:
    text = """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  input_stream: "loop"
  output_stream: "out"
  output_stream: "loop"
}
"""
    found = issues(text)
    assert len(found) == 1
    assert found[0][0].startswith(
        "Generator side packet cycle or calculator stream cycle detected in graph: "
        "[PassThroughCalculator]"
    )
    assert found[0][1] == "g.pbtxt:2"
    marked = text.replace(
        '  output_stream: "loop"\n',
        '  output_stream: "loop"\n  input_stream_info { tag_index: ":1" back_edge: true }\n',
    )
    graph = ValidatedGraph.from_config(marked)
    assert graph.nodes[0].back_edges == frozenset({1})


def test_input_stream_info_naming_a_non_input() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  input_stream_info: { tag_index: "LOOPBACK:0" back_edge: true }
}
"""
    )
    assert found == [
        (
            'Input stream with tag_index "LOOPBACK:0" requested in InputStreamInfo but is not an '
            "input stream of the calculator.",
            "g.pbtxt:6",
        ),
    ]


def test_duplicate_input_stream_info() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  input_stream_info: { tag_index: ":0" back_edge: false }
  input_stream_info: { tag_index: "" back_edge: false }
}
"""
    )
    assert found == [
        ('Input stream with tag_index "" has more than one InputStreamInfo.', "g.pbtxt:7"),
    ]


def test_duplicate_node_options_type() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "GateCalculator"
  input_stream: "in"
  output_stream: "out"
  node_options: {
    [type.googleapis.com/mediapipe.GateCalculatorOptions]: { allow: true }
  }
  node_options: {
    [type.googleapis.com/mediapipe.GateCalculatorOptions]: { allow: false }
  }
}
"""
    )
    assert found == [
        (
            "Options type: 'type.googleapis.com/mediapipe.GateCalculatorOptions' specified more "
            "than once for a single calculator node config.",
            "g.pbtxt:10",
        ),
    ]


def test_contract_mismatch_lists_missing_and_unexpected_ports() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "TestValidationInOutCalculator"
  input_stream: "in"
  output_stream: "OUT:out"
}
"""
    )
    assert len(found) == 1
    message, location = found[0]
    assert message.startswith("TestValidationInOutCalculator::GetContract failed to validate:")
    assert 'Failed to get tag "IN" index 0' in message
    assert 'Tag "" index 0 was not expected.' in message
    assert 'tag "OUT"' not in message  # the output port is fine
    assert location == "g.pbtxt:2"


def test_unexpected_side_packet_port() -> None:
    found = issues(
        """\
input_side_packet: "m"
node {
  calculator: "TestValidationSideCalculator"
  input_side_packet: "MODEL:m"
  input_side_packet: "EXTRA:e"
}
"""
    )
    assert len(found) == 1
    assert "For input side packets" in found[0][0]
    assert 'Tag "EXTRA" index 0 was not expected.' in found[0][0]


def test_pass_through_needs_matching_tags() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "OUT:out"
}
"""
    )
    assert found == [
        (
            "PassThroughCalculator: Input and output streams to PassThroughCalculator must use "
            "matching tags and indexes.",
            "g.pbtxt:2",
        ),
    ]


def test_stream_type_mismatch() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "TestValidationInOutCalculator"
  input_stream: "IN:in"
  output_stream: "OUT:number"
}
node {
  name: "sink"
  calculator: "TestValidationStrSinkCalculator"
  input_stream: "IN:number"
}
"""
    )
    assert found == [
        (
            'Input stream "number" of calculator "sink" expects packets of type "str" but the '
            'connected output stream will contain packets of type "int"',
            "g.pbtxt:7",
        ),
    ]


def test_side_packet_produced_twice() -> None:
    found = issues(
        """\
input_side_packet: "m"
node {
  calculator: "TestValidationSideCalculator"
  input_side_packet: "MODEL:m"
  output_side_packet: "MADE:made"
}
node {
  calculator: "TestValidationSideCalculator"
  input_side_packet: "MODEL:m"
  output_side_packet: "MADE:made"
}
"""
    )
    assert found == [('Output Side Packet "made" defined twice.', "g.pbtxt:7")]


def test_bad_port_syntax_is_reported_at_its_node() -> None:
    found = issues(
        """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "In"
  output_stream: "out"
}
"""
    )
    assert any(
        message.startswith('TAG:index:name is invalid, "In" does not match') for message, _ in found
    )
    assert all(location == "g.pbtxt:2" for message, location in found if "In" in message)


def test_tagged_port_repeated_without_index_is_a_duplicate() -> None:
    found = issues(
        """\
input_stream: "a"
input_stream: "b"
node {
  calculator: "PassThroughCalculator"
  input_stream: "TAG:a"
  input_stream: "TAG:b"
  output_stream: "TAG:0:x"
  output_stream: "TAG:1:y"
}
"""
    )
    assert (
        'tag "TAG" index 0 already had a name "a" but is being reassigned a name "b"',
        "g.pbtxt:3",
    ) in found


async def test_missing_required_side_packet_is_reported_at_start_run() -> None:
    graph = Graph(
        """
        node { calculator: "TestValidationSideCalculator" input_side_packet: "MODEL:x" }
        """
    )
    with pytest.raises(GraphUsageError) as caught:
        await graph.start_run({})
    assert str(caught.value) == 'Side packet "x" is required but was not provided.'
    running_after_refusal = graph.running
    assert not running_after_refusal
    # The refused start leaves the graph startable.
    await graph.start_run({"x": 1})
    assert graph.running
    graph.close_all_packet_sources()  # the node is a source: stop it
    await graph.wait_until_done()


def test_reserved_and_undeclared_executors() -> None:
    found = issues(
        """\
input_stream: "in"
executor { name: "default" }
executor { name: "__private" }
executor { name: "gpu" }
executor { name: "pool" type: "ThreadPoolExecutor" }
executor { name: "pool" type: "ThreadPoolExecutor" }
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  executor: "missing"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "out"
  output_stream: "out2"
  executor: "pool"
}
"""
    )
    assert found == [
        ('"default" is a reserved executor name.', "g.pbtxt:2"),
        ('"__private" is a reserved executor name.', "g.pbtxt:3"),
        ('"gpu" is a reserved executor name.', "g.pbtxt:4"),
        ('ExecutorConfig for "pool" is duplicate.', "g.pbtxt:6"),
        ('The executor "missing" is not declared in an ExecutorConfig.', "g.pbtxt:11"),
    ]


SYNC_SET_GRAPH = """\
input_stream: "a"
input_stream: "b"
node {
  calculator: "PassThroughCalculator"
  input_stream: "A:a"
  input_stream: "B:b"
  output_stream: "A:x"
  output_stream: "B:y"
  input_stream_handler {
    input_stream_handler: "SyncSetInputStreamHandler"
    options {
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {
        sync_set { tag_index: "A" }
        %s
      }
    }
  }
}
"""


def test_sync_set_naming_an_unknown_stream() -> None:
    found = issues(SYNC_SET_GRAPH % 'sync_set { tag_index: "C:0" }')
    assert found == [
        (
            'SyncSetInputStreamHandler: stream "C:0" is not an input stream of the node.',
            "g.pbtxt:9",
        ),
    ]


def test_sync_set_stream_in_two_sets() -> None:
    found = issues(SYNC_SET_GRAPH % 'sync_set { tag_index: "B" tag_index: "A:0" }')
    assert found == [
        ('SyncSetInputStreamHandler: stream "A:0" is in more than one sync set.', "g.pbtxt:9"),
    ]


def test_sync_set_options_that_are_fine_validate() -> None:
    graph = ValidatedGraph.from_config(SYNC_SET_GRAPH % 'sync_set { tag_index: "B:0" }')
    assert graph.nodes[0].handler.__name__ == "SyncSetInputStreamHandler"


UNKNOWN_OPTIONS = """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  node_options: {
    [type.googleapis.com/mediapipe.TestValidationNoSuchOptions]: { threshold: 0.5 }
  }
}
"""


def test_unknown_options_type_parses_but_does_not_validate() -> None:
    config = parse_graph_config(UNKNOWN_OPTIONS, PATH)
    assert config.proto.node[0].calculator == "PassThroughCalculator"
    found = issues(UNKNOWN_OPTIONS)
    assert len(found) == 1
    message, location = found[0]
    assert 'options of type "mediapipe.TestValidationNoSuchOptions" are not known' in message
    assert location == "g.pbtxt:7"


def test_unknown_options_type_at_the_graph_level_is_only_parsed() -> None:
    text = """\
input_stream: "in"
graph_options: {
  [type.googleapis.com/mediapipe.TestValidationNoSuchGraphOptions]: { threshold: 0.5 }
}
node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "out" }
"""
    config = parse_graph_config(text, PATH)
    assert config.option_type_names("graph_options")[0][0] == (
        "mediapipe.TestValidationNoSuchGraphOptions"
    )
    assert ValidatedGraph.from_config(config).nodes[0].name == "PassThroughCalculator"


def test_unneeded_back_edge_is_a_warning_not_an_error(caplog: pytest.LogCaptureFixture) -> None:
    text = """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "mid"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "mid"
  output_stream: "out"
  input_stream_info: { tag_index: "" back_edge: true }
}
"""
    with caplog.at_level(logging.WARNING, logger="graphruntime.validation"):
        graph = ValidatedGraph.from_config(parse_graph_config(text, PATH))
    expected = (
        'Input Stream "mid" for node with sorted index 1 name PassThroughCalculator_2 is marked '
        "as a back edge, but its output stream is already available.  This means it was not "
        "necessary to mark it as a back edge."
    )
    assert [(w.message, str(w.location)) for w in graph.warnings] == [(expected, "g.pbtxt:9")]
    assert expected in caplog.text


def test_back_edge_on_a_graph_input_is_a_warning() -> None:
    text = """\
input_stream: "in"
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
  input_stream_info: { tag_index: "" back_edge: true }
}
"""
    graph = ValidatedGraph.from_config(parse_graph_config(text, PATH))
    assert [(w.message, str(w.location)) for w in graph.warnings] == [
        (
            'Input Stream "in" for node with sorted index 0 name PassThroughCalculator is marked '
            "as a back edge, but its output stream is already available.  This means it was not "
            "necessary to mark it as a back edge.",
            "g.pbtxt:4",
        ),
    ]


def test_needed_back_edge_gives_no_warning() -> None:
    graph = ValidatedGraph.from_config(
        """
        input_stream: "in"
        node {
          calculator: "PassThroughCalculator"
          input_stream: "in" input_stream: "loop"
          output_stream: "out" output_stream: "loop"
          input_stream_info { tag_index: ":1" back_edge: true }
        }
        """
    )
    assert graph.warnings == ()


def test_every_problem_is_reported_together() -> None:
    text = """\
input_stream: "in"
executor { name: "default" }
node {
  calculator: "NoSuchThingAtAllXyz"
  input_stream: "in"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "nowhere"
  output_stream: "out"
}
node {
  calculator: "PassThroughCalculator"
  input_stream: "in"
  output_stream: "out"
}
"""
    with pytest.raises(GraphValidationError) as caught:
        ValidatedGraph.from_config(parse_graph_config(text, PATH))
    found = {(issue.message, str(issue.location)) for issue in caught.value.issues}
    assert found == {
        ('"default" is a reserved executor name.', "g.pbtxt:2"),
        ('Unable to find Calculator "NoSuchThingAtAllXyz"' + NOT_A_SUBGRAPH, "g.pbtxt:4"),
        ('Output Stream "out" defined twice.', "g.pbtxt:15"),
        (
            'Input Stream "nowhere" for node with sorted index 1 name PassThroughCalculator_1 does '
            "not have a corresponding output stream.",
            "g.pbtxt:9",
        ),
    }
    text_lines = str(caught.value).splitlines()
    assert len(text_lines) == 4
    assert all(line.startswith("g.pbtxt:") for line in text_lines)


def test_unproduced_graph_output_and_unconsumed_streams_are_fine() -> None:
    graph = ValidatedGraph.from_config(
        """
        input_stream: "in"
        output_stream: "never_made"
        node { calculator: "PassThroughCalculator" input_stream: "in" output_stream: "unused" }
        """
    )
    assert graph.stream_names() == ["in", "unused"]


def test_handler_choice_node_over_graph_over_contract_over_default() -> None:
    def handlers(text: str) -> dict[str, Any]:
        graph = ValidatedGraph.from_config(text)
        return {node.name: node.handler.__name__ for node in graph.nodes}

    nodes = """
    node { name: "plain" calculator: "PassThroughCalculator" input_stream: "in" output_stream: "a" }
    node { name: "mux" calculator: "MuxCalculator" input_stream: "INPUT:0:in"
           input_stream: "SELECT:sel" output_stream: "OUTPUT:b" }
    node { name: "own" calculator: "PassThroughCalculator" input_stream: "in" output_stream: "c"
           input_stream_handler { input_stream_handler: "BarrierInputStreamHandler" } }
    """
    inputs = 'input_stream: "in" input_stream: "sel"\n'
    assert handlers(inputs + nodes) == {
        "plain": "DefaultInputStreamHandler",
        "mux": "MuxInputStreamHandler",
        "own": "BarrierInputStreamHandler",
    }
    graph_default = 'input_stream_handler { input_stream_handler: "ImmediateInputStreamHandler" }\n'
    assert handlers(inputs + graph_default + nodes) == {
        "plain": "ImmediateInputStreamHandler",
        "mux": "ImmediateInputStreamHandler",
        "own": "BarrierInputStreamHandler",
    }
