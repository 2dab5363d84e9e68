"""Tests of graph text parsing: positions, text-format syntax, and options of unknown types."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.message import Message

from calculators.llm import llm_calculator_pb2
from graphruntime._proto import calculator_pb2, stream_handler_options_pb2
from graphruntime.config import GraphConfig, load_graph_config, parse_graph_config
from graphruntime.errors import GraphConfigError, SourceLocation

# demos/continuous_batching/graph.pbtxt of OpenVINO Model Server.
OVMS_GRAPH = """\
input_stream: "HTTP_REQUEST_PAYLOAD:input"
output_stream: "HTTP_RESPONSE_PAYLOAD:output"

node: {
  name: "LLMExecutor"
  calculator: "HttpLLMCalculator"
  input_stream: "LOOPBACK:loopback"
  input_stream: "HTTP_REQUEST_PAYLOAD:input"
  input_side_packet: "LLM_NODE_RESOURCES:llm"
  output_stream: "LOOPBACK:loopback"
  output_stream: "HTTP_RESPONSE_PAYLOAD:output"
  input_stream_info: {
    tag_index: 'LOOPBACK:0',
    back_edge: true
  }
  node_options: {
      [type.googleapis.com / mediapipe.LLMCalculatorOptions]: {
          models_path: "./",
          plugin_config: '{"KV_CACHE_PRECISION": "u8", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}',
          enable_prefix_caching: false
          cache_size: 0
      }
  }
  input_stream_handler {
    input_stream_handler: "SyncSetInputStreamHandler",
    options {
      [mediapipe.SyncSetInputStreamHandlerOptions.ext] {
        sync_set {
          tag_index: "LOOPBACK:0"
        }
      }
    }
  }
}
"""

# Types no descriptor pool of the runtime knows, as in graphs of calculators not installed.
UNKNOWN_OPTIONS_GRAPH = """\
node {
  calculator: "FooCalculator"
  node_options: {
    [type.googleapis.com /  mediapipe . FooOptions] {
      threshold: 0.5
      label: "a"
    }
  }
  node_options {
    [type.googleapis.com/mediapipe.LLMCalculatorOptions] { models_path: "/m" }
  }
}
node {
  calculator: "BarCalculator"
  options {
    [mediapipe.FooOptions.ext] { threshold: 0.25 },
  }
}
"""


def foo_options_class() -> type[Message]:
    """A message type built at test time, so the default descriptor pool cannot know it."""
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="test_config_foo.proto", package="mediapipe", syntax="proto2"
    )
    message = file_proto.message_type.add(name="FooOptions")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="threshold", number=1, type=field.TYPE_FLOAT, label=field.LABEL_OPTIONAL)
    message.field.add(name="label", number=2, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(file_proto.SerializeToString())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("mediapipe.FooOptions"))


def one_line(message: Message | None) -> str:
    assert message is not None
    return text_format.MessageToString(message, as_one_line=True)


def config_error(text: str) -> GraphConfigError:
    with pytest.raises(GraphConfigError) as caught:
        parse_graph_config(text, "graph.pbtxt")
    return caught.value


def test_ovms_llm_graph_parses_with_its_options() -> None:
    config = parse_graph_config(OVMS_GRAPH, "graph.pbtxt")

    node = config.proto.node[0]
    assert node.calculator == "HttpLLMCalculator"
    assert list(node.input_stream) == ["LOOPBACK:loopback", "HTTP_REQUEST_PAYLOAD:input"]
    assert node.input_stream_info[0].back_edge
    llm = config.decode_options(("node", 0), llm_calculator_pb2.LLMCalculatorOptions)
    assert llm is not None
    assert llm.models_path == "./"
    assert llm.plugin_config == (
        '{"KV_CACHE_PRECISION": "u8", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "32"}'
    )
    assert llm.HasField("cache_size")
    assert llm.cache_size == 0
    handler = config.decode_options(
        ("node", 0, "input_stream_handler", "options"),
        stream_handler_options_pb2.SyncSetInputStreamHandlerOptions,
    )
    assert handler is not None
    assert list(handler.sync_set[0].tag_index) == ["LOOPBACK:0"]
    assert config.opaque_options("node", 0, "node_options") == ()


def test_ovms_llm_graph_positions() -> None:
    config = parse_graph_config(OVMS_GRAPH, "graph.pbtxt")

    assert config.location("node", 0) == SourceLocation("graph.pbtxt", 4, 1)
    assert config.location("node", 0, "input_stream", 1) == SourceLocation("graph.pbtxt", 8, 3)
    assert config.location("node", 0, "calculator") == SourceLocation("graph.pbtxt", 6, 3)
    assert config.location("node", 0, "input_stream_info", 0) == SourceLocation(
        "graph.pbtxt", 12, 3
    )
    assert config.location("node", 0, "input_stream_handler") == SourceLocation(
        "graph.pbtxt", 24, 3
    )
    assert config.location("output_stream", 0) == SourceLocation("graph.pbtxt", 2, 1)
    # No record of the Any itself beyond its slot: the nearest ancestor answers.
    assert config.location("node", 0, "node_options", 0, "models_path") == SourceLocation(
        "graph.pbtxt", 16, 3
    )
    assert config.location("executor", 0) is None
    assert config.option_type_names("node", 0) == (
        ("mediapipe.LLMCalculatorOptions", SourceLocation("graph.pbtxt", 17, 7)),
    )


def test_text_format_syntax_variants() -> None:
    config = parse_graph_config(
        """# leading comment
        input_stream: ['in', "side" 'car']  # list syntax, concatenated strings
        num_threads: 0x4;
        node: < calculator: 'A'; input_stream: "in", output_stream: "mid" >
        node {
          calculator: "B"  # trailing comment
          input_stream: "mid"
          input_stream_info: [{tag_index: "X:0"}, <tag_index: "X:1" back_edge: true>]
        }
        executor {}
        executor: {
          name: "pool"
          options { [mediapipe.ThreadPoolExecutorOptions.ext]: { num_threads: 3 } }
        }
        """
    )

    assert list(config.proto.input_stream) == ["in", "sidecar"]
    assert config.proto.num_threads == 4
    assert [node.calculator for node in config.proto.node] == ["A", "B"]
    assert [info.back_edge for info in config.proto.node[1].input_stream_info] == [False, True]
    assert config.location("input_stream", 1) == SourceLocation(None, 2, 30)
    assert config.location("node", 0) == SourceLocation(None, 4, 9)
    assert config.location("node", 0, "output_stream", 0) == SourceLocation(None, 4, 54)
    assert config.location("node", 1, "input_stream_info", 1) == SourceLocation(None, 8, 51)
    assert config.location("executor", 1) == SourceLocation(None, 11, 9)
    executor = config.decode_options(
        ("executor", 1), stream_handler_options_pb2.ThreadPoolExecutorOptions
    )
    assert one_line(executor) == "num_threads: 3"


def test_unknown_option_types_stay_opaque() -> None:
    config = parse_graph_config(UNKNOWN_OPTIONS_GRAPH, "graph.pbtxt")

    (foo_any,) = config.opaque_options("node", 0, "node_options")
    assert foo_any.type_name == "mediapipe.FooOptions"
    assert foo_any.kind == "any"
    assert foo_any.text == '\n      threshold: 0.5\n      label: "a"\n    '
    assert foo_any.location == SourceLocation("graph.pbtxt", 4, 54)
    node_options = config.proto.node[0].node_options
    assert [item.type_url for item in node_options] == [
        "type.googleapis.com/mediapipe.FooOptions",
        "type.googleapis.com/mediapipe.LLMCalculatorOptions",
    ]
    assert node_options[0].value == b""
    (foo_ext,) = config.opaque_options("node", 1, "options")
    assert (foo_ext.type_name, foo_ext.kind) == ("mediapipe.FooOptions.ext", "extension")
    assert foo_ext.text == " threshold: 0.25 "
    assert foo_ext.location == SourceLocation("graph.pbtxt", 16, 33)
    assert config.option_type_names("node", 0) == (
        ("mediapipe.FooOptions", SourceLocation("graph.pbtxt", 4, 5)),
        ("mediapipe.LLMCalculatorOptions", SourceLocation("graph.pbtxt", 10, 5)),
    )


def test_opaque_options_decode_once_their_type_is_known() -> None:
    config = parse_graph_config(UNKNOWN_OPTIONS_GRAPH, "graph.pbtxt")
    foo_options = foo_options_class()

    assert one_line(config.decode_options(("node", 0), foo_options)) == 'threshold: 0.5 label: "a"'
    assert one_line(config.decode_options(("node", 1), foo_options)) == "threshold: 0.25"
    llm = config.decode_options(("node", 0), llm_calculator_pb2.LLMCalculatorOptions)
    assert llm is not None
    assert llm.models_path == "/m"
    assert config.decode_options(("node", 1), llm_calculator_pb2.LLMCalculatorOptions) is None


def test_node_options_extension_wins_over_node_options_any() -> None:
    config = parse_graph_config(
        """node {
          calculator: "FooCalculator"
          node_options { [type.googleapis.com/mediapipe.FooOptions] { threshold: 1.5 } }
          options { [mediapipe.FooOptions.ext] { threshold: 2.5 } }
        }"""
    )

    assert one_line(config.decode_options(("node", 0), foo_options_class())) == "threshold: 2.5"
    assert [name for name, _ in config.option_type_names("node", 0)] == [
        "mediapipe.FooOptions",
        "mediapipe.FooOptions.ext",
    ]


def test_graph_level_options_are_found() -> None:
    config = parse_graph_config(
        """graph_options: { [type.googleapis.com/mediapipe.FooOptions]: { label: "g" } }
        options { [mediapipe.FooOptions.ext] { label: "h" } }"""
    )

    assert [o.text for o in config.opaque_options("graph_options")] == [' label: "g" ']
    assert [o.text for o in config.opaque_options("options")] == [' label: "h" ']
    assert one_line(config.decode_options((), foo_options_class())) == 'label: "h"'


def test_opaque_any_in_list_syntax_keeps_its_index() -> None:
    config = parse_graph_config(
        """node {
          calculator: "FooCalculator"
          node_options: [
            {[type.googleapis.com/mediapipe.LLMCalculatorOptions] {models_path: "m"}},
            {[type.googleapis.com/mediapipe.FooOptions]: <label: "x">}
          ]
        }"""
    )

    assert [item.type_url.rpartition(".")[2] for item in config.proto.node[0].node_options] == [
        "LLMCalculatorOptions",
        "FooOptions",
    ]
    assert config.location("node", 0, "node_options", 1) == SourceLocation(None, 5, 13)
    assert [o.text for o in config.opaque_options("node", 0, "node_options")] == ['label: "x"']


def test_malformed_type_name_is_an_error() -> None:
    error = config_error("node {\n  node_options { [type.googleapis.com/mediapipe Foo] {} }\n}")

    assert error.message == "Malformed name '[type.googleapis.com/mediapipe Foo]'"
    assert error.location == SourceLocation("graph.pbtxt", 2, 18)


def test_syntax_error_reports_its_line() -> None:
    error = config_error('node {\n  calculator: "A"\n  input_stream: }\n}\n')

    assert error.location == SourceLocation("graph.pbtxt", 3, 17)
    assert "input_stream" in error.message


def test_unknown_field_reports_its_line() -> None:
    error = config_error('node {\n  calculator: "A"\n  input_streams: "x"\n}\n')

    assert error.location == SourceLocation("graph.pbtxt", 3, 3)
    assert error.message == (
        'Message type "mediapipe.CalculatorGraphConfig.Node" has no field named "input_streams".'
    )
    assert str(error).startswith("graph.pbtxt:3: Message type")


def test_wrong_value_type_reports_its_line_without_protobuf_echo() -> None:
    error = config_error("\nnode {\n  calculator: 5\n}\n")

    assert error.location == SourceLocation("graph.pbtxt", 3, 15)
    assert error.message == "Expected string but found: '5'"


def test_unterminated_block_names_the_opening_line() -> None:
    error = config_error('input_stream: "a"\n\nnode {\n  calculator: "A"\n  input_stream_info {}\n')

    assert error.message == 'Expected "}" to close "node" opened at line 3'
    assert error.location is not None
    assert error.location.line == 5


def test_unterminated_string_reports_its_line() -> None:
    error = config_error('node {\n  calculator: "A\n}\n')

    assert error.location == SourceLocation("graph.pbtxt", 2, 15)


def test_error_inside_opaque_block_is_reported_at_its_real_line() -> None:
    config = parse_graph_config(
        "node {\n"
        '  calculator: "FooCalculator"\n'
        "  node_options {\n"
        "    [type.googleapis.com/mediapipe.FooOptions] {\n"
        "      threshold: 0.5\n"
        "      colour: 3\n"
        "    }\n"
        "  }\n"
        "}\n",
        "graph.pbtxt",
    )

    with pytest.raises(GraphConfigError) as caught:
        config.decode_options(("node", 0), foo_options_class())
    assert caught.value.location == SourceLocation("graph.pbtxt", 6, 7)
    assert 'no field named "colour"' in caught.value.message


def test_error_on_the_first_line_of_an_opaque_block_keeps_its_column() -> None:
    config = parse_graph_config(
        'node { options { [mediapipe.FooOptions.ext] { threshold: "x" } } }', "graph.pbtxt"
    )

    with pytest.raises(GraphConfigError) as caught:
        config.decode_options(("node", 0), foo_options_class())
    assert caught.value.location == SourceLocation("graph.pbtxt", 1, 58)


def test_from_proto_has_no_locations_but_decodes_options() -> None:
    proto = calculator_pb2.CalculatorGraphConfig()
    node = proto.node.add(calculator="HttpLLMCalculator")
    packed = any_pb2.Any()
    packed.Pack(llm_calculator_pb2.LLMCalculatorOptions(models_path="/models"))
    node.node_options.append(packed)
    sync = node.input_stream_handler.options.Extensions[
        stream_handler_options_pb2.SyncSetInputStreamHandlerOptions.ext
    ]
    sync.sync_set.add(tag_index=["A:0"])

    config = GraphConfig.from_proto(proto)

    assert config.proto is proto
    assert config.path is None
    assert config.location("node", 0) is None
    assert config.opaque_options("node", 0) == ()
    llm = config.decode_options(("node", 0), llm_calculator_pb2.LLMCalculatorOptions)
    assert llm is not None
    assert llm.models_path == "/models"
    handler = config.decode_options(
        ("node", 0, "input_stream_handler"),
        stream_handler_options_pb2.SyncSetInputStreamHandlerOptions,
    )
    assert handler is not None
    assert list(handler.sync_set[0].tag_index) == ["A:0"]
    assert config.option_type_names("node", 0, "input_stream_handler", "options") == (
        ("mediapipe.SyncSetInputStreamHandlerOptions.ext", None),
    )


def test_load_graph_config_carries_the_path(tmp_path: Path) -> None:
    graph = tmp_path / "graph.pbtxt"
    graph.write_text('node {\n  calculator: "A"\n  bogus: 1\n}\n', encoding="utf-8")

    with pytest.raises(GraphConfigError) as caught:
        load_graph_config(graph)
    assert caught.value.location == SourceLocation(str(graph), 3, 3)

    graph.write_text(OVMS_GRAPH, encoding="utf-8")
    assert load_graph_config(graph).location("node", 0) == SourceLocation(str(graph), 4, 1)


def test_load_graph_config_reports_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(GraphConfigError, match=r"missing\.pbtxt"):
        load_graph_config(tmp_path / "missing.pbtxt")
