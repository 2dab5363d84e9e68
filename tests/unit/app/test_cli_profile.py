"""`graphrt graph profile` and `graphrt graph show --format html` on small graphs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphrt.cli.main import main

GRAPH = """
input_stream: "in"
output_stream: "out"
node { name: "first" calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid" }
node { name: "second" calculator: "PassThroughCalculator" input_stream: "mid"
       output_stream: "out" }
"""


def test_profile_prints_a_row_per_node_and_writes_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "graph.pbtxt"
    path.write_text(GRAPH)
    traces = tmp_path / "traces"
    code = main(
        [
            "graph", "profile", str(path), "--input", "in=1", "--input", 'in={"a": [2]}',
            "--repeat", "5", "--trace_dir", str(traces),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert "output out: 10 packets" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("node"))
    assert lines[header].split()[1:] == ["calls", "total", "ms", "mean", "ms", "p99", "ms", "%",
                                         "wall"]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[header + 2 : header + 4]}
    assert set(rows) == {"first", "second"}
    assert rows["first"][1] == "10" and rows["second"][1] == "10"
    assert rows["first"][-1].endswith("%")
    trace = traces / "profile_trace_0.json"
    assert f"trace: {trace}" in out
    events = json.loads(trace.read_text())
    assert sum(1 for e in events if e.get("cat") == "Process") == 20


def test_profile_refuses_an_unknown_stream(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "graph.pbtxt"
    path.write_text(GRAPH)
    assert main(["graph", "profile", str(path), "--input", "nope=1"]) == 2
    assert "--input nope: the graph has no such input stream (in)" in capsys.readouterr().err
    assert main(["graph", "profile", str(path), "--input", "in"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_show_html_draws_without_graphviz(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "graph.pbtxt"
    path.write_text(GRAPH)
    assert main(["graph", "show", "--format", "html", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("<!doctype html>")
    assert 'data-node="0"' in out and 'data-node="1"' in out and ">second<" in out
