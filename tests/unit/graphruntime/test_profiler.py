"""The profiler: profiler_config honoured with MediaPipe's names, Chrome trace files, the table."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest

from graphruntime import Graph, GraphRunError, Packet, calculator_function
from graphruntime.config import parse_graph_config
from graphruntime.layout import layout, to_svg
from graphruntime.profiler import GraphProfiler


@calculator_function(inputs=["IN"], outputs=["OUT"], name="ProfileFailOnNegative")
def fail_on_negative(value: int) -> int:
    if value < 0:
        raise ValueError("negative")
    return value


def chain(profiler_config: str) -> str:
    return f"""
    input_stream: "in"
    output_stream: "out"
    profiler_config {{ {profiler_config} }}
    node {{ name: "first" calculator: "PassThroughCalculator" input_stream: "in"
           output_stream: "mid" }}
    node {{ name: "check" calculator: "ProfileFailOnNegative" input_stream: "IN:mid"
           output_stream: "OUT:out" }}
    """


async def run(graph: Graph, values: list[int]) -> None:
    await graph.start_run()
    for timestamp, value in enumerate(values):
        await graph.add_packet("in", Packet(value, timestamp * 10))
    graph.close_all_packet_sources()
    await graph.wait_until_done()


def events_of(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as file:
        loaded: list[dict[str, Any]] = json.load(file)
    return loaded


async def test_no_profiler_config_means_no_profiler() -> None:
    graph = Graph(chain(""))
    assert graph.profiler is None
    assert graph.observers == []


async def test_trace_file_holds_one_event_per_call_with_inputs(tmp_path: Path) -> None:
    prefix = tmp_path / "trace_"
    graph = Graph(chain(f'trace_enabled: true enable_profiler: true trace_log_path: "{prefix}"'))
    await run(graph, [1, 2, 3])
    assert graph.profiler is not None
    assert graph.profiler.files_written == [f"{prefix}0.json"]
    events = events_of(f"{prefix}0.json")
    process = [e for e in events if e.get("cat") == "Process"]
    assert len(process) == 6
    for event in process:
        assert event["ph"] == "X"
        assert event["dur"] >= 0 and isinstance(event["ts"], float)
        assert event["name"] in ("first", "check")
    check = sorted((e for e in process if e["name"] == "check"), key=lambda e: e["ts"])
    assert [e["args"]["input_timestamp"] for e in check] == [0, 10, 20]
    assert check[1]["args"]["inputs"] == [{"stream": "mid", "timestamp": 10}]
    assert check[1]["args"]["calculator"] == "ProfileFailOnNegative"
    assert {e["cat"] for e in events if e["ph"] == "X"} == {"Open", "Process", "Close"}
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"first", "check"} <= names


async def test_files_rotate_by_interval_count_and_log_count(tmp_path: Path) -> None:
    prefix = tmp_path / "rot_"
    config = (
        f'trace_enabled: true trace_log_path: "{prefix}" '
        "trace_log_interval_count: 1 trace_log_count: 2"
    )
    graph = Graph(chain(config))
    for value in range(3):  # one write per run: files 0, 1, then 0 again (truncated)
        await run(graph, [value + 1])
    assert sorted(Path(p).name for p in tmp_path.iterdir()) == ["rot_0.json", "rot_1.json"]
    third = [e for e in events_of(f"{prefix}0.json") if e.get("cat") == "Process"]
    assert [e["args"]["run"] for e in third] == [3, 3]


async def test_appending_keeps_the_file_valid_json(tmp_path: Path) -> None:
    prefix = tmp_path / "app_"
    graph = Graph(chain(f'trace_enabled: true trace_log_path: "{prefix}"'))
    for value in range(3):
        await run(graph, [value + 1, value + 2])
    process = [e for e in events_of(f"{prefix}0.json") if e.get("cat") == "Process"]
    assert len(process) == 12
    assert {e["args"]["run"] for e in process} == {1, 2, 3}


async def test_instant_events_disabled_types_and_filter(tmp_path: Path) -> None:
    prefix = tmp_path / "opt_"
    config = (
        f'trace_enabled: true enable_profiler: true trace_log_path: "{prefix}" '
        "trace_log_instant_events: true trace_event_types_disabled: 1 "
        'trace_event_types_disabled: 3 calculator_filter: "che.*"'
    )
    graph = Graph(chain(config))
    await run(graph, [5])
    events = [e for e in events_of(f"{prefix}0.json") if e["ph"] != "M"]
    assert [(e["name"], e["cat"], e["ph"]) for e in events] == [
        ("check", "Process", "B"),
        ("check", "Process", "E"),
    ]
    assert graph.profiler is not None
    assert [row["node"] for row in graph.profiler.summary()] == ["check"]


async def test_trace_log_disabled_records_without_writing(tmp_path: Path) -> None:
    graph = Graph(
        chain(f'trace_enabled: true trace_log_disabled: true trace_log_path: "{tmp_path}/x_"')
    )
    await run(graph, [1])
    assert graph.profiler is not None
    assert len([e for e in graph.profiler.events if e.phase == "Process"]) == 2
    assert list(tmp_path.iterdir()) == []


async def test_profile_counts_calls_errors_and_histogram() -> None:
    config = (
        "enable_profiler: true histogram_interval_size_usec: 1000000 num_histogram_intervals: 3"
    )
    graph = Graph(chain(config))
    await run(graph, [1, 2])
    with pytest.raises(GraphRunError):
        await run(graph, [-1])
    assert graph.profiler is not None
    rows = {row["node"]: row for row in graph.profiler.summary()}
    assert rows["first"]["calls"] == 3 and rows["check"]["calls"] == 3
    assert rows["check"]["errors"] == 1
    assert 0 < rows["first"]["wall_share"] < 1
    profiles = {p["name"]: p for p in graph.profiler.calculator_profiles()}
    assert profiles["first"]["process_runtime"]["count"] == [3, 0, 0]
    table = graph.profiler.format_table()
    assert table.splitlines()[0].split() == [
        "node",
        "calls",
        "total",
        "ms",
        "mean",
        "ms",
        "p99",
        "ms",
        "%",
        "wall",
    ]
    assert "first" in table and "check" in table


async def test_trace_dir_turns_tracing_on_for_any_graph(tmp_path: Path) -> None:
    plain = Graph(chain(""))
    profiler = GraphProfiler.from_config(plain.validated, trace_dir=str(tmp_path), name="my/graph")
    assert profiler is not None
    graph = Graph(plain.validated, profiler=profiler)
    await run(graph, [1])
    assert profiler.files_written == [str(tmp_path / "my_graph_trace_0.json")]


async def test_overlapping_calls_of_a_node_go_on_separate_rows(tmp_path: Path) -> None:
    prefix = tmp_path / "lanes_"
    graph = Graph(chain(f'trace_enabled: true trace_log_path: "{prefix}"'))
    assert graph.profiler is not None
    await run(graph, [1])
    profiler = graph.profiler
    # Two calls of "first" that overlap in time, as concurrent runs make them.
    profiler._trace("Process", 0, 100, 300, 0, (), 7, None)
    profiler._trace("Process", 0, 200, 400, 0, (), 8, None)
    path = profiler.write()
    assert path is not None
    rows = {
        e["args"]["run"]: e["tid"]
        for e in events_of(path)
        if e.get("cat") == "Process" and e["args"]["run"] in (7, 8)
    }
    assert rows[7] != rows[8]


def test_layout_draws_nodes_back_edges_and_side_packets() -> None:
    config = parse_graph_config(
        """
        input_stream: "in"
        output_stream: "out"
        input_side_packet: "model"
        node { name: "loop" calculator: "PassThroughCalculator" input_stream: "in"
               input_stream: "LOOP:back" input_side_packet: "model"
               output_stream: "out" output_stream: "LOOP:back"
               input_stream_info: { tag_index: "LOOP" back_edge: true } }
        """
    )
    picture = layout(config, figure_lines=2)
    assert {box.kind for box in picture.boxes.values()} == {"input", "output", "node", "side"}
    assert {edge.kind for edge in picture.edges} == {"stream", "back", "side"}
    svg = to_svg(picture, figure_lines=2)
    root = ElementTree.fromstring(svg)
    groups = [g for g in root.iter("{http://www.w3.org/2000/svg}g")]
    assert any(g.get("data-node") == "0" for g in groups)
    assert any("back" in (g.get("class") or "") for g in groups)
    assert svg.count('class="fig"') == 2
