"""`graphrt graph validate` and `graphrt graph show` on OVMS's LLM graph and its broken variants."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphrt.cli.main import main
from graphruntime import Packet, calculator_function
from graphruntime.calculator_graph import CalculatorGraph
from graphruntime.config import load_graph_config
from graphruntime.node_checks import NOT_A_SUBGRAPH

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "graphs"
OVMS_GRAPH = (FIXTURES / "llm_continuous_batching.pbtxt").read_text()


@calculator_function(inputs=["A", "B"], outputs=["SUM"], name="RunningSumAdder")
def running_sum_adder(a: int, b: int | None) -> int:
    return a + (b or 0)


def write(tmp_path: Path, text: str, name: str = "graph.pbtxt") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def line_of(text: str, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing `needle`."""
    seen = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in text")


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(["graph", "validate", *args])
    return code, [line for line in capsys.readouterr().out.splitlines() if line]


def test_ovms_llm_graph_validates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, OVMS_GRAPH)
    assert validate(capsys, str(path)) == (0, [])


# Run in a fresh interpreter: this test process may have imported calculators already.
FRESH_PARSE_AND_VALIDATE = """
import json, sys
from google.protobuf import text_format
from graphruntime import ValidatedGraph
from graphruntime.config import load_graph_config

config = load_graph_config(sys.argv[1])
before = sorted(m for m in sys.modules if m.split(".")[0] in ("calculators", "servables"))
opaque = [o.type_name for o in config.opaque_options("node", 0, "node_options")]
graph = ValidatedGraph.from_config(config)
calculator = graph.nodes[0].calculator
options = graph.node_options(graph.nodes[0], calculator.options_type)
print(json.dumps({
    "loaded_by_parsing": before,
    "opaque_after_parsing": opaque,
    "options_type": type(options).DESCRIPTOR.full_name,
    "options": text_format.MessageToString(options, as_one_line=True),
}))
"""


def test_ovms_llm_graph_gets_typed_options_from_its_calculator() -> None:
    """The core parses an OVMS LLM graph without any calculator package (its options stay
    opaque text); validating it loads HttpLLMCalculator (entry point), whose module brings its
    LLMCalculatorOptions, and the options decode to that type."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            FRESH_PARSE_AND_VALIDATE,
            str(FIXTURES / "llm_continuous_batching.pbtxt"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    assert found["loaded_by_parsing"] == []
    assert found["opaque_after_parsing"] == ["mediapipe.LLMCalculatorOptions"]
    assert found["options_type"] == "mediapipe.LLMCalculatorOptions"
    assert found["options"] == (
        'models_path: "./model" cache_size: 2 max_num_seqs: 64 '
        'plugin_config: "{\\"KV_CACHE_PRECISION\\": \\"u8\\"}" enable_prefix_caching: true'
    )


def test_bad_llm_options_are_reported_at_their_line(tmp_path: Path) -> None:
    """Decoded only when the calculator asks (its contract), a broken options block is still
    reported where the fault is, in a process where nothing typed the options up front."""
    text = OVMS_GRAPH.replace("cache_size: 2,", 'cache_size: "two",', 1)
    path = write(tmp_path, text)
    result = subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", "graph", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        f'{path}:{line_of(text, "cache_size")}: HttpLLMCalculator: Couldn\'t parse integer: "two"'
    ]


@pytest.mark.parametrize(
    ("old", "new", "message", "needle"),
    [
        (
            'calculator: "HttpLLMCalculator"',
            'calculator: "HttpLLMCalculatr"',
            'Unable to find Calculator "HttpLLMCalculatr"; did you mean "HttpLLMCalculator"?'
            + NOT_A_SUBGRAPH,
            "HttpLLMCalculatr",
        ),
        (
            "back_edge: true",
            "back_edge: false",
            "Generator side packet cycle or calculator stream cycle detected in graph: "
            "[LLMExecutor]",
            "node: {",
        ),
        (
            'input_stream: "LOOPBACK:loopback"',
            'input_stream: "LOOPBACK:loop_back_typo"',
            'Input Stream "loop_back_typo" for node with sorted index 0 name LLMExecutor does not '
            "have a corresponding output stream.",
            "loop_back_typo",
        ),
        (
            '"SyncSetInputStreamHandler"',
            '"SyncSetInputHandler"',
            '"SyncSetInputHandler" is not a registered input stream handler.',
            "input_stream_handler {",
        ),
        (
            'tag_index: "LOOPBACK:0"',
            'tag_index: "LOOPBAK:0"',
            'SyncSetInputStreamHandler: stream "LOOPBAK:0" is not an input stream of the node.',
            "input_stream_handler {",
        ),
        (
            'output_stream: "HTTP_RESPONSE_PAYLOAD:output"\n  input_stream_info',
            'output_stream: "HTTP_RESPONSE_PAYLOAD:output"\n  output_stream: "EXTRA:more"\n'
            "  input_stream_info",
            'HttpLLMCalculator::GetContract failed to validate: For output streams: Tag "EXTRA" '
            "index 0 was not expected.",
            "node: {",
        ),
        (
            'input_stream: "HTTP_REQUEST_PAYLOAD:input"\n  input_side_packet',
            'input_stream: "HTTP_REQUEST_PAYLOAD:Input"\n  input_side_packet',
            'TAG:index:name is invalid, "HTTP_REQUEST_PAYLOAD:Input" does not match',
            "node: {",
        ),
        (
            "tag_index: 'LOOPBACK:0',",
            "tag_index: 'LOOPBACK:1',",
            'Input stream with tag_index "LOOPBACK:1" requested in InputStreamInfo but is not an '
            "input stream of the calculator.",
            "input_stream_info: {",
        ),
    ],
)
def test_broken_variants_fail_with_message_and_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    message: str,
    needle: str,
) -> None:
    assert old in OVMS_GRAPH
    text = OVMS_GRAPH.replace(old, new, 1)
    path = write(tmp_path, text)
    code, lines = validate(capsys, str(path))
    assert code == 1
    expected_prefix = f"{path}:{line_of(text, needle)}: "
    assert any(line.startswith(expected_prefix) and message in line for line in lines), lines


def test_syntax_error_reports_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = OVMS_GRAPH.replace("back_edge: true", "back_edge: true,\n    unknown_field: 3")
    path = write(tmp_path, text)
    code, lines = validate(capsys, "--parse-only", str(path))
    assert code == 1
    assert lines[0].startswith(f"{path}:{line_of(text, 'unknown_field')}: ")
    assert "unknown_field" in lines[0]


def test_several_files_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = write(tmp_path, OVMS_GRAPH, "good.pbtxt")
    bad = write(
        tmp_path,
        OVMS_GRAPH.replace("HttpLLMCalculator", "NoSuchCalculator").replace(
            '"SyncSetInputStreamHandler"', '"NoSuchHandler"'
        ),
        "bad.pbtxt",
    )
    code, lines = validate(capsys, str(good), str(bad))
    assert code == 1
    assert all(line.startswith(f"{bad}:") for line in lines)
    assert len(lines) == 1  # an unknown calculator stops checks that need its contract


def test_parse_only_accepts_unknown_calculators_and_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    paths = sorted(str(p) for p in FIXTURES.glob("*.pbtxt"))
    assert validate(capsys, "--parse-only", *paths) == (0, [])


def test_unknown_options_fail_only_when_used(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = validate(capsys, str(FIXTURES / "face_tracking_style.pbtxt"))
    assert code == 1
    assert any('Unable to find Calculator "FlowLimiterCalculator"' in line for line in lines)


def test_real_world_runnable_fixtures_validate_and_run(capsys: pytest.CaptureFixture[str]) -> None:
    paths = [FIXTURES / "gated_mux.pbtxt", FIXTURES / "running_sum.pbtxt"]
    assert validate(capsys, *map(str, paths)) == (0, [])
    graph = CalculatorGraph(load_graph_config(FIXTURES / "running_sum.pbtxt"))
    sums: list[int] = []
    graph.observe_output_stream("sums", lambda _, packet: sums.append(packet.payload))
    graph.start_run()
    for number in (1, 2, 3, 4):
        graph.add_packet_to_input_stream("numbers", Packet(number, number))
    graph.close()
    assert sums == [1, 3, 6, 10]


@pytest.mark.parametrize("fmt", ["text", "dot"])
def test_show_draws_nodes_streams_side_packets_and_back_edges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    path = write(tmp_path, OVMS_GRAPH)
    assert main(["graph", "show", "--format", fmt, str(path)]) == 0
    out = capsys.readouterr().out
    assert "LLMExecutor" in out and "HttpLLMCalculator" in out
    assert "llm" in out and "loopback" in out
    assert "back edge" in out
    if fmt == "dot":
        assert out.startswith("digraph") and "constraint=false" in out and "shape=note" in out


@pytest.mark.system
def test_show_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("dot") is None:
        pytest.fail(
            "Graphviz's dot is not installed; .ci/run installs it: apt-get install graphviz"
        )
    path = write(tmp_path, OVMS_GRAPH)
    code = main(["graph", "show", "--format", "svg", str(path)])
    captured = capsys.readouterr()
    assert code == 0
    assert "<svg" in captured.out and "LLMExecutor" in captured.out


def test_show_svg_without_graphviz_says_what_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = write(tmp_path, OVMS_GRAPH)
    code = main(["graph", "show", "--format", "svg", str(path)])
    assert code == 1
    assert "apt install graphviz" in capsys.readouterr().err


def test_show_writes_to_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, OVMS_GRAPH)
    target = tmp_path / "graph.dot"
    assert main(["graph", "show", "--format", "dot", "-o", str(target), str(path)]) == 0
    assert target.read_text().startswith("digraph")
