"""`graphrt graph expand|show|validate|profile` on graphs built from subgraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from graphrt.cli.main import main
from graphruntime import calculator_function
from graphruntime.config import parse_graph_config


@calculator_function(inputs=["IN"], outputs=["OUT"], name="CliSgTriple")
def triple(value: int) -> int:
    return value * 3


TRIPLER = """
type: "Tripler"
input_stream: "IN:x"
output_stream: "OUT:y"
node {
  calculator: "CliSgTriple"
  input_stream: "IN:x"
  output_stream: "OUT:y"
}
"""
GRAPH = """
input_stream: "in"
output_stream: "out"
node { calculator: "Tripler" input_stream: "IN:in" output_stream: "OUT:mid" }
node { name: "again" calculator: "Tripler" input_stream: "IN:mid" output_stream: "OUT:out" }
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "tripler.pbtxt").write_text(TRIPLER)
    (tmp_path / "graph.pbtxt").write_text(GRAPH)
    return tmp_path / "graph.pbtxt", tmp_path / "lib"


def test_expand_prints_the_flattened_config(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    graph, lib = files
    assert main(["graph", "expand", str(graph), "--subgraph_path", str(lib)]) == 0
    text = capsys.readouterr().out
    config = parse_graph_config(text)
    assert [n.name for n in config.proto.node] == ["tripler__CliSgTriple", "again__CliSgTriple"]
    assert [list(n.input_stream) for n in config.proto.node] == [["IN:in"], ["IN:mid"]]


def test_expand_without_the_path_names_the_missing_subgraph_at_its_line(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    graph, _ = files
    assert main(["graph", "validate", str(graph)]) == 1
    out = capsys.readouterr().out
    assert f"{graph}:4: " in out and "Tripler" in out


def test_validate_finds_subgraphs_on_the_path(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    graph, lib = files
    assert main(["graph", "validate", str(graph), "--subgraph_path", str(lib)]) == 0


def test_show_groups_nodes_by_subgraph_or_collapses_them(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    graph, lib = files
    assert main(["graph", "show", str(graph), "--subgraph_path", str(lib)]) == 0
    text = capsys.readouterr().out
    assert "node 1: CliSgTriple" in text and "subgraph: Tripler (again)" in text
    assert f"[{lib / 'tripler.pbtxt'}:5]" in text
    assert main(["graph", "show", "--format", "dot", str(graph), "--subgraph_path", str(lib)]) == 0
    dot = capsys.readouterr().out
    assert 'subgraph "cluster_again" {' in dot and 'label="Tripler (again)"' in dot
    assert main(["graph", "show", "--format", "html", str(graph), "--subgraph_path", str(lib)]) == 0
    assert 'data-subgraph="Tripler"' in capsys.readouterr().out
    assert main(["graph", "show", "--subgraphs", "collapsed", str(graph)]) == 0
    collapsed = capsys.readouterr().out
    assert "node 0: Tripler" in collapsed and "subgraph:" not in collapsed


def test_profile_table_says_which_subgraph_each_node_came_from(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    graph, lib = files
    code = main(["graph", "profile", str(graph), "--input", "in=2", "--subgraph_path", str(lib)])
    assert code == 0
    out = capsys.readouterr().out
    assert "output out: 1 packets" in out
    rows = [line for line in out.splitlines() if "CliSgTriple" in line]
    assert len(rows) == 2 and all(row.rstrip().endswith("Tripler") for row in rows)
