"""Request tracing, with OpenTelemetry's in-memory exporter: calculator and engine spans."""

from __future__ import annotations

import ast
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from graphrt.observability.tracing import Tracing
from graphruntime import Graph, GraphRunError, Packet, calculator_function
from servables.llm.choices import RequestStats


@calculator_function(inputs=["IN"], outputs=["OUT"], name="TracingFailOnNegative")
def fail_on_negative(value: int) -> int:
    if value < 0:
        raise ValueError("negative input")
    return value


GRAPH = """
input_stream: "in"
node { name: "first" calculator: "PassThroughCalculator" input_stream: "in" output_stream: "mid" }
node { name: "check" calculator: "TracingFailOnNegative" input_stream: "IN:mid"
       output_stream: "OUT:out" }
"""


@pytest.fixture
def traced() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), exporter


async def run(graph: Graph, values: list[int]) -> None:
    await graph.start_run()
    for timestamp, value in enumerate(values):
        await graph.add_packet("in", Packet(value, timestamp))
    graph.close_all_packet_sources()
    await graph.wait_until_done()


async def test_each_process_call_is_a_child_of_the_request_span(
    traced: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced
    graph = Graph(GRAPH, observers=[tracing])
    with tracing.tracer.start_as_current_span("request") as request:
        await run(graph, [1, 2])
    spans = exporter.get_finished_spans()
    calls = [s for s in spans if s.name in ("first", "check")]
    assert len(calls) == 4
    request_id = request.get_span_context().span_id
    for span in calls:
        assert span.parent is not None and span.parent.span_id == request_id
        assert span.context.trace_id == request.get_span_context().trace_id
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time
    check = sorted((s for s in calls if s.name == "check"), key=lambda s: s.start_time or 0)
    assert check[1].attributes is not None
    assert check[1].attributes["graphrt.calculator"] == "TracingFailOnNegative"
    assert check[1].attributes["graphrt.input_timestamp"] == 1
    assert check[1].attributes["graphrt.input_streams"] == "mid"


async def test_a_failed_call_is_an_error_span_and_untraced_runs_make_none(
    traced: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced
    graph = Graph(GRAPH, observers=[tracing])
    await run(graph, [1])  # no current span: nothing is recorded
    assert exporter.get_finished_spans() == ()
    with tracing.tracer.start_as_current_span("request"), pytest.raises(GraphRunError):
        await run(graph, [-1])
    (failed,) = [s for s in exporter.get_finished_spans() if s.name == "check"]
    assert failed.status.status_code.name == "ERROR"
    assert failed.events[0].name == "exception"


def test_a_generation_becomes_engine_spans_with_ttft_and_tokens(
    traced: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced
    now = time.perf_counter()
    stats = RequestStats(
        submitted=now - 1.0,
        first_token=now - 0.6,
        last_token=now,
        prompt_tokens=12,
        completion_tokens=20,
        first_step_seconds=0.1,
    )
    with tracing.tracer.start_as_current_span("request") as request:
        tracing.finished(SimpleNamespace(name="smollm2"), stats)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    generate = spans["llm.generate"]
    assert generate.parent is not None
    assert generate.parent.span_id == request.get_span_context().span_id
    assert generate.attributes is not None
    assert generate.attributes["gen_ai.usage.input_tokens"] == 12
    assert generate.attributes["gen_ai.usage.output_tokens"] == 20
    assert [event.name for event in generate.events] == ["first_token"]
    assert generate.attributes["graphrt.ttft_seconds"] == pytest.approx(0.4)
    durations = {
        name: ((spans[name].end_time or 0) - (spans[name].start_time or 0)) / 1e9
        for name in ("llm.queue", "llm.prefill", "llm.decode")
    }
    assert durations["llm.queue"] == pytest.approx(0.3, abs=1e-3)
    assert durations["llm.prefill"] == pytest.approx(0.1, abs=1e-3)
    assert durations["llm.decode"] == pytest.approx(0.6, abs=1e-3)
    for name in durations:
        parent = spans[name].parent
        assert parent is not None and parent.span_id == generate.context.span_id


def test_without_tracing_nothing_imports_opentelemetry() -> None:
    code = (
        "import sys, graphrt.cli.main, graphrt.server\n"
        "import calculators.llm.http_llm\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_only_the_tracing_module_imports_opentelemetry() -> None:
    root = Path(__file__).resolve().parents[3]
    importers = []
    for package in ("graphruntime", "calculators", "servables", "graphrt"):
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = [
                alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names
            ] + [
                node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            ]  # fmt: skip
            if any(name.split(".")[0] == "opentelemetry" for name in names):
                importers.append(path.relative_to(root).as_posix())
    assert importers == ["graphrt/observability/tracing.py"]
