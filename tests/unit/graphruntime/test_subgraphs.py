"""Subgraph expansion: MediaPipe's names, stream binding, options and errors, and runs.

The expected expansions follow MediaPipe's rules (tool/subgraph_expansion.cc): the nodes that are
not subgraphs keep their order and each subgraph's nodes follow; names inside a subgraph get the
using node's name, lowercased, and "__" as a prefix; declared streams become what the using node
connects. tools/compare_mediapipe_expansion.py checks the same rules against MediaPipe itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphruntime import (
    Graph,
    GraphValidationError,
    Packet,
    SubgraphContext,
    SubgraphError,
    ValidatedGraph,
    calculator_function,
    expand_subgraphs,
    register_subgraph,
    subgraph_registry,
)
from graphruntime.config import load_graph_config, parse_graph_config
from graphruntime.config_print import config_to_text, mediapipe_order
from graphruntime.errors import GraphConfigError
from graphruntime.subgraphs import SubgraphLibrary


@calculator_function(inputs=["IN"], outputs=["OUT"], name="SgAddOne")
def add_one(value: int) -> int:
    return value + 1


@calculator_function(inputs=["IN"], outputs=["OUT"], name="SgDouble")
def double(value: int) -> int:
    return value * 2


DOUBLER = """
type: "Doubler"
input_stream: "IN:x"
output_stream: "OUT:y"
node { calculator: "SgDouble" input_stream: "IN:x" output_stream: "OUT:mid" }
node { calculator: "PassThroughCalculator" input_stream: "mid" output_stream: "y" }
"""
QUAD = """
type: "Quad"
input_stream: "IN:a"
output_stream: "OUT:b"
node { calculator: "Doubler" input_stream: "IN:a" output_stream: "OUT:m" }
node { calculator: "Doubler" input_stream: "IN:m" output_stream: "OUT:b" }
"""

# A node before a subgraph that uses another subgraph twice.
ADD_THEN_QUAD = """
input_stream: "in"
output_stream: "out"
node { calculator: "SgAddOne" input_stream: "IN:in" output_stream: "OUT:p" }
node { calculator: "Quad" input_stream: "IN:p" output_stream: "OUT:out" }
"""


def write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


@pytest.fixture
def library(tmp_path: Path) -> Path:
    """A directory of subgraph files: Doubler, and Quad which uses Doubler twice."""
    write(tmp_path / "lib", "doubler.pbtxt", DOUBLER)
    write(tmp_path / "lib", "quad.pbtxt", QUAD)
    return tmp_path / "lib"


def expand(path: Path, *paths: Path) -> Any:
    return expand_subgraphs(load_graph_config(path), SubgraphLibrary([str(p) for p in paths]))


def nodes(config: Any) -> list[tuple[str, str, list[str], list[str]]]:
    return [
        (n.name, n.calculator, list(n.input_stream), list(n.output_stream))
        for n in config.proto.node
    ]


async def run(graph: Graph, values: list[int], stream: str = "out") -> list[int]:
    out: list[int] = []
    graph.observe_output_stream(stream, lambda _, p: out.append(p.payload))
    await graph.start_run({})
    for t, value in enumerate(values):
        await graph.add_packet("in", Packet(value, t))
    graph.close_all_packet_sources()
    await graph.wait_until_done()
    return out


# ------------------------------------------------------------------------------ expansion


def test_nested_subgraphs_expand_with_mediapipes_names(tmp_path: Path, library: Path) -> None:
    graph = write(tmp_path, "graph.pbtxt", ADD_THEN_QUAD)
    expanded = expand(graph, library)
    # Round 1 keeps the adder and appends Quad's two Doubler nodes (named Doubler_1, Doubler_2);
    # round 2 replaces those by their nodes, each prefixed with its user's lowercased name.
    assert nodes(expanded) == [
        ("", "SgAddOne", ["IN:in"], ["OUT:p"]),
        (
            "quad__doubler_1__SgDouble",
            "SgDouble",
            ["IN:p"],
            ["OUT:quad__doubler_1__mid"],
        ),
        ("quad__doubler_1__PassThroughCalculator", "PassThroughCalculator",
         ["quad__doubler_1__mid"], ["quad__m"]),
        (
            "quad__doubler_2__SgDouble",
            "SgDouble",
            ["IN:quad__m"],
            ["OUT:quad__doubler_2__mid"],
        ),
        ("quad__doubler_2__PassThroughCalculator", "PassThroughCalculator",
         ["quad__doubler_2__mid"], ["out"]),
    ]  # fmt: skip
    uses = expanded.subgraphs(1)
    assert [(u.name, u.type) for u in uses] == [("Quad", "Quad"), ("quad__Doubler_1", "Doubler")]
    assert uses[0].location is not None and uses[0].location.path == str(graph)
    assert uses[1].location is not None and uses[1].location.path == str(library / "quad.pbtxt")
    # Each node is located in the file that wrote it, and says which use brought it in.
    where = expanded.location("node", 1)
    assert where.path == str(library / "doubler.pbtxt") and where.line == 5
    assert "subgraph Doubler used at" in where.via and "subgraph Quad used at" in where.via


async def test_a_graph_of_nested_subgraphs_runs(tmp_path: Path, library: Path) -> None:
    graph = write(tmp_path, "graph.pbtxt", ADD_THEN_QUAD)
    validated = ValidatedGraph.from_file(graph, subgraph_paths=[library])
    assert await run(Graph(validated), [1, 2, 5]) == [8, 12, 24]
    assert {n.name: [u.type for u in n.subgraphs] for n in validated.nodes}[
        "quad__doubler_2__PassThroughCalculator"
    ] == ["Quad", "Doubler"]


def test_a_subgraph_in_the_graphs_own_directory_needs_no_path(tmp_path: Path) -> None:
    write(tmp_path, "doubler.pbtxt", DOUBLER)
    graph = write(
        tmp_path,
        "graph.pbtxt",
        'input_stream: "in"\nnode { calculator: "Doubler" input_stream: "IN:in" '
        'output_stream: "OUT:out" }',
    )
    assert [n.calculator for n in expand(graph).proto.node] == [
        "SgDouble",
        "PassThroughCalculator",
    ]


def test_side_packets_bind_and_unconnected_inputs_are_dropped(tmp_path: Path) -> None:
    write(
        tmp_path,
        "tagger.pbtxt",
        """
        type: "Tagger"
        input_stream: "IN:x"
        input_stream: "EXTRA:extra"
        output_stream: "OUT:y"
        input_side_packet: "PREFIX:prefix"
        output_side_packet: "ECHO:echo"
        node {
          calculator: "TestSideTaggerCalculator"
          input_stream: "x"
          input_stream: "extra"
          output_stream: "y"
          input_side_packet: "PREFIX:prefix"
          output_side_packet: "ECHO:echo"
        }
        """,
    )
    graph = write(
        tmp_path,
        "graph.pbtxt",
        """
        input_stream: "in"
        input_side_packet: "p"
        node { calculator: "Tagger" input_stream: "IN:in" output_stream: "OUT:out"
               input_side_packet: "PREFIX:p" output_side_packet: "ECHO:e" }
        """,
    )
    (node,) = expand(graph).proto.node
    assert node.name == "tagger__TestSideTaggerCalculator"
    assert list(node.input_stream) == ["in"]  # EXTRA is declared but not connected: dropped
    assert list(node.input_side_packet) == ["PREFIX:p"]
    assert list(node.output_side_packet) == ["ECHO:e"]


def test_a_subgraph_used_twice_gets_two_prefixes(tmp_path: Path, library: Path) -> None:
    graph = write(
        tmp_path,
        "graph.pbtxt",
        """
        input_stream: "in"
        node { name: "first" calculator: "Doubler" input_stream: "IN:in" output_stream: "OUT:a" }
        node { calculator: "Doubler" input_stream: "IN:a" output_stream: "OUT:out" }
        """,
    )
    names = [n.name for n in expand(graph, library).proto.node]
    assert names == [
        "first__SgDouble",
        "first__PassThroughCalculator",
        "doubler__SgDouble",
        "doubler__PassThroughCalculator",
    ]


def test_graph_options_and_option_value_copy_fields(tmp_path: Path) -> None:
    """A known type (OVMS's session options) and one graphrt has no descriptor for."""
    write(
        tmp_path,
        "model.pbtxt",
        """
        type: "Model"
        output_side_packet: "SESSION:session"
        graph_options: {
          [type.googleapis.com/mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {
            servable_name: "default" servable_version: "2"
          }
        }
        graph_options: { [type.googleapis.com/acme.ScaleOptions]: { factor: 1 offsets: 1 } }
        node {
          calculator: "OpenVINOModelServerSessionCalculator"
          output_side_packet: "SESSION:session"
          options: {
            [mediapipe.OpenVINOModelServerSessionCalculatorOptions.ext]: { log_level: "DEBUG" }
          }
          option_value: "servable_name:options/servable_name"
          option_value: "servable_version:options/servable_version"
        }
        node {
          calculator: "Scaler"
          node_options: { [type.googleapis.com/acme.ScalerOptions]: { scale: 5 keep: true } }
          option_value: "scale:Ext::acme.ScaleOptions/factor"
          option_value: "offset:Ext::acme.ScaleOptions/offsets"
        }
        """,
    )
    graph = write(
        tmp_path,
        "graph.pbtxt",
        """
        node {
          calculator: "Model"
          output_side_packet: "SESSION:s"
          node_options: {
            [type.googleapis.com/mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {
              servable_name: "iris"
            }
          }
        }
        """,
    )
    import calculators.openvino.openvino_calculators_pb2 as ov_options

    expanded = expand(graph)
    session = expanded.decode_options(
        ("node", 0), ov_options.OpenVINOModelServerSessionCalculatorOptions
    )
    # The node's options merged over the subgraph's, the node's own literal kept; the options
    # move to node_options (`options` is cleared), as MediaPipe's SetOptionsMessage does.
    assert session is not None
    assert (session.servable_name, session.servable_version, session.log_level) == (
        "iris",
        "2",
        "DEBUG",
    )
    assert not expanded.proto.node[0].HasField("options")
    assert not expanded.proto.node[0].option_value
    (scaler,) = expanded.opaque_options("node", 1)
    assert " ".join(scaler.text.split()) == "scale: 1 keep: true offset: 1"


def test_an_option_the_graph_leaves_unset_clears_the_nodes_literal(tmp_path: Path) -> None:
    """MediaPipe copies what the graph's options hold, nothing included."""
    write(
        tmp_path,
        "sub.pbtxt",
        """
        type: "Sub"
        graph_options: { [type.googleapis.com/acme.A]: { other: 1 } }
        node { calculator: "X" node_options: { [type.googleapis.com/acme.B]: { b: 7 c: 1 } }
               option_value: "b:options/missing" }
        """,
    )
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Sub" }')
    (options,) = expand(graph).opaque_options("node", 0)
    assert options.text.split() == ["c:", "1"]


def test_whole_options_merge_into_a_nested_subgraph_node(tmp_path: Path) -> None:
    """ "OPTIONS:options" passes the options on to the next level, as MediaPipe's CPU graphs do."""
    write(
        tmp_path,
        "inner.pbtxt",
        """
        type: "Inner"
        graph_options: { [type.googleapis.com/acme.Opts]: {} }
        node { calculator: "X" node_options: { [type.googleapis.com/acme.XOpts]: {} }
               option_value: "width:options/size/width" }
        """,
    )
    write(
        tmp_path,
        "outer.pbtxt",
        """
        type: "Outer"
        graph_options: { [type.googleapis.com/acme.Opts]: { size { width: 1 height: 2 } } }
        node { calculator: "Inner"
               node_options: { [type.googleapis.com/acme.Opts]: { size { height: 3 } } }
               option_value: "OPTIONS:options" }
        """,
    )
    graph = write(
        tmp_path,
        "graph.pbtxt",
        'node { calculator: "Outer" node_options: { [type.googleapis.com/acme.Opts]: '
        "{ size { width: 9 } } } }",
    )
    (options,) = expand(graph).opaque_options("node", 0)
    assert options.text.split() == ["width:", "9"]


def test_python_subgraph_reads_the_nodes_options(tmp_path: Path) -> None:
    import calculators.openvino.openvino_calculators_pb2 as ov_options

    @register_subgraph(name="TestNamedModel")
    def named_model(context: SubgraphContext) -> str:
        options = context.options(ov_options.OpenVINOModelServerSessionCalculatorOptions)
        assert options is not None
        return f"""
            output_side_packet: "SESSION:s"
            node {{ calculator: "Session{options.servable_name}" output_side_packet: "S:s" }}
        """

    try:
        config = parse_graph_config(
            """
            node { calculator: "TestNamedModel" output_side_packet: "SESSION:mine"
                   node_options: {
                     [type.googleapis.com/mediapipe.OpenVINOModelServerSessionCalculatorOptions]: {
                       servable_name: "Iris"
                     }
                   } }
            """
        )
        (node,) = expand_subgraphs(config, SubgraphLibrary()).proto.node
        assert (node.calculator, list(node.output_side_packet)) == ("SessionIris", ["S:mine"])
    finally:
        subgraph_registry.unregister("TestNamedModel")


@pytest.fixture
def python_subgraph() -> Iterator[None]:
    subgraph_registry.register(
        "TestAddThenDouble",
        """
        input_stream: "IN:x"
        output_stream: "OUT:y"
        node { calculator: "SgAddOne" input_stream: "IN:x" output_stream: "OUT:m" }
        node { calculator: "SgDouble" input_stream: "IN:m" output_stream: "OUT:y" }
        """,
    )
    yield
    subgraph_registry.unregister("TestAddThenDouble")


async def test_a_python_registered_subgraph_of_python_calculators_runs(
    python_subgraph: None,
) -> None:
    graph = Graph(
        """
        input_stream: "in"
        output_stream: "out"
        node { calculator: "TestAddThenDouble" input_stream: "IN:in" output_stream: "OUT:out" }
        """
    )
    assert await run(graph, [0, 3]) == [2, 8]
    assert [n.name for n in graph.validated.nodes] == [
        "testaddthendouble__SgAddOne",
        "testaddthendouble__SgDouble",
    ]


# ---------------------------------------------------------------------------------- errors


def test_a_tag_the_subgraph_does_not_declare_names_both_files(
    tmp_path: Path, library: Path
) -> None:
    graph = write(
        tmp_path,
        "graph.pbtxt",
        'input_stream: "in"\n\nnode { calculator: "Doubler" input_stream: "IMAGE:in" }',
    )
    with pytest.raises(SubgraphError) as raised:
        expand(graph, library)
    assert str(raised.value).startswith(f"{graph}:3: ")
    assert 'Tag "IMAGE" of the input streams is not declared by subgraph "Doubler"' in str(
        raised.value
    )
    assert str(library / "doubler.pbtxt") in str(raised.value) and "declares: IN" in str(
        raised.value
    )


def test_a_cycle_of_subgraphs_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "ping.pbtxt", 'type: "Ping"\nnode { calculator: "Pong" }')
    write(tmp_path, "pong.pbtxt", 'type: "Pong"\nnode { calculator: "Ping" }')
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Ping" }')
    with pytest.raises(SubgraphError, match="uses itself: Ping -> Pong -> Ping") as raised:
        expand(graph)
    assert raised.value.location is not None
    assert raised.value.location.path == str(tmp_path / "pong.pbtxt")


def test_an_unknown_calculator_inside_a_subgraph_points_at_both_files(
    tmp_path: Path,
) -> None:
    write(tmp_path, "broken.pbtxt", 'type: "Broken"\n\nnode { calculator: "NoSuchThing" }')
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Broken" }')
    with pytest.raises(GraphValidationError) as raised:
        ValidatedGraph.from_file(graph)
    text = str(raised.value)
    assert text.startswith(f"{tmp_path / 'broken.pbtxt'}:3: ")
    assert "NoSuchThing" in text and f"(in subgraph Broken used at {graph}:1)" in text


def test_calculator_only_fields_on_a_subgraph_node_are_refused(
    tmp_path: Path, library: Path
) -> None:
    graph = write(
        tmp_path,
        "graph.pbtxt",
        'node { calculator: "Doubler" input_stream: "IN:x" source_layer: 1 }',
    )
    with pytest.raises(SubgraphError, match="sets source_layer, which only a calculator has"):
        expand(graph, library)


def test_a_failing_python_subgraph_is_reported_at_the_node(tmp_path: Path) -> None:
    @register_subgraph(name="TestFailing")
    def failing(context: SubgraphContext) -> str:
        raise ValueError("no model named")

    try:
        graph = write(tmp_path, "graph.pbtxt", '\nnode { calculator: "TestFailing" }')
        with pytest.raises(SubgraphError, match="could not be built: ValueError: no model named"):
            expand(graph)
    finally:
        subgraph_registry.unregister("TestFailing")


# ------------------------------------------------------------------------- finding files


def test_two_files_of_one_type_prefer_the_one_named_after_it(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib, "doubler.pbtxt", DOUBLER)
    write(lib, "doubler_copy.pbtxt", DOUBLER.replace("PassThroughCalculator", "Other"))
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Doubler" input_stream: "IN:a" }')
    assert [n.calculator for n in expand(graph, lib).proto.node][-1] == "PassThroughCalculator"


def test_ambiguous_files_are_an_error_unless_one_is_given_by_itself(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    write(lib, "cpu.pbtxt", DOUBLER)
    write(lib, "gpu.pbtxt", DOUBLER.replace("PassThroughCalculator", "GpuPass"))
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Doubler" input_stream: "IN:a" }')
    with pytest.raises(GraphConfigError, match='"Doubler" is declared by 2 files'):
        expand(graph, lib)
    chosen = expand(graph, lib / "gpu.pbtxt", lib)
    assert [n.calculator for n in chosen.proto.node][-1] == "GpuPass"


def test_a_file_is_also_found_by_its_name(tmp_path: Path) -> None:
    """MediaPipe registers files by their BUILD name; some carry another (stale) `type:`."""
    write(tmp_path / "lib", "fast_doubler.pbtxt", DOUBLER)
    graph = write(
        tmp_path, "graph.pbtxt", 'node { calculator: "FastDoubler" input_stream: "IN:a" }'
    )
    assert len(expand(graph, tmp_path / "lib").proto.node) == 2


def test_an_edited_subgraph_file_is_read_again(tmp_path: Path, library: Path) -> None:
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "Doubler" input_stream: "IN:a" }')
    assert len(expand(graph, library).proto.node) == 2
    write(library, "doubler.pbtxt", DOUBLER.replace('node { calculator: "PassThrough', "#"))
    assert len(expand(graph, library).proto.node) == 1


def test_a_registered_calculator_is_never_taken_for_a_file(tmp_path: Path) -> None:
    write(tmp_path, "pass_through.pbtxt", DOUBLER.replace("Doubler", "PassThroughCalculator"))
    graph = write(tmp_path, "graph.pbtxt", 'node { calculator: "PassThroughCalculator" }')
    assert [n.calculator for n in expand(graph).proto.node] == ["PassThroughCalculator"]


# ------------------------------------------------------------------------------- printing


def test_the_expanded_text_parses_back_with_opaque_options(tmp_path: Path) -> None:
    write(
        tmp_path,
        "sub.pbtxt",
        """
        type: "Sub"
        input_stream: "IN:a"
        node { calculator: "X" input_stream: "a"
               options: { [acme.XOptions.ext]: { level { value: 3 } name: "x" } } }
        """,
    )
    graph = write(
        tmp_path,
        "graph.pbtxt",
        'input_stream: "in"\nnode { calculator: "Sub" input_stream: "IN:in" }',
    )
    expanded = expand(graph)
    text = config_to_text(expanded, mediapipe_order(expanded.proto))
    assert "[acme.XOptions.ext] {\n      level {\n        value: 3\n      }" in text
    again = parse_graph_config(text)
    assert again.proto == expanded.proto
    (options,) = again.opaque_options("node", 0)
    assert options.text.split() == ["level", "{", "value:", "3", "}", "name:", '"x"']


def test_mediapipe_order_is_topological_lowest_index_first() -> None:
    config = parse_graph_config(
        """
        input_stream: "in"
        node { calculator: "C" input_stream: "b" input_stream: "loop" output_stream: "c"
               input_stream_info: { tag_index: ":1" back_edge: true } }
        node { calculator: "B" input_stream: "a" output_stream: "b" }
        node { calculator: "A" input_stream: "in" output_stream: "a" output_stream: "loop" }
        node { calculator: "Side" output_side_packet: "s" }
        node { calculator: "D" input_side_packet: "s" input_stream: "in" output_stream: "d" }
        """
    )
    assert mediapipe_order(config.proto) == [2, 1, 0, 3, 4]


# Found through the entry point in the test below.
PUBLISHED_SUBGRAPH = """
input_stream: "IN:x"
output_stream: "OUT:y"
node { calculator: "SgDouble" input_stream: "IN:x" output_stream: "OUT:y" }
"""


def test_an_installed_package_publishes_a_subgraph_by_entry_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib.metadata import EntryPoint

    import graphruntime.subgraphs as module

    point = EntryPoint("Published", f"{__name__}:PUBLISHED_SUBGRAPH", module.SUBGRAPH_ENTRY_POINTS)
    monkeypatch.setattr(module, "subgraph_registry", module.SubgraphRegistry())
    monkeypatch.setattr(module.importlib.metadata, "entry_points", lambda group: [point])
    config = parse_graph_config('node { calculator: "Published" input_stream: "IN:a" }')
    (node,) = expand_subgraphs(config, SubgraphLibrary()).proto.node
    assert (node.name, node.calculator, list(node.input_stream)) == (
        "published__SgDouble",
        "SgDouble",
        ["IN:a"],
    )
    assert module.subgraph_registry.names() == ["Published"]
