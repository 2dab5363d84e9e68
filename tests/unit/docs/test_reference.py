"""Every built-in calculator, `graphrt` flag and metric has a description, so the generated
reference pages (tools/docs_reference.py) never show an empty entry; and the hand-written tables
name no flag or metric that no longer exists."""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "tools" / "docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_reference"] = module
    spec.loader.exec_module(module)
    return module


def test_every_calculator_has_a_docstring(reference: ModuleType) -> None:
    calculators = reference.calculators()
    names = {c.name for c in calculators}
    assert {"GateCalculator", "HttpLLMCalculator", "OpenVINOInferenceCalculator"} <= names
    undocumented = [c.name for c in calculators if not c.description.strip()]
    assert not undocumented, f"calculators without a docstring: {undocumented}"


def test_calculator_options_come_from_the_proto_descriptor(reference: ModuleType) -> None:
    gate = next(c for c in reference.calculators() if c.name == "GateCalculator")
    assert gate.options_type == "mediapipe.GateCalculatorOptions"
    fields = {o.name: o for o in gate.options}
    assert fields["empty_packets_as_allow"].type == "bool"
    assert fields["empty_packets_as_allow"].default == "false"
    assert "ALLOW:enabled" in (gate.example or "")


def test_every_flag_has_help(reference: ModuleType) -> None:
    flags = reference.flags()
    commands = {f.command for f in flags}
    assert {"graphrt serve", "graphrt export", "graphrt graph validate"} <= commands
    assert any(f.flags == "--rest_port" for f in flags)
    undocumented = [f"{f.command} {f.flags}" for f in flags if not f.help.strip()]
    assert not undocumented, f"flags without help text: {undocumented}"
    assert all(description for _, description in reference.commands())


def test_a_flag_without_help_is_found(reference: ModuleType) -> None:
    """The check above can fail: an undocumented flag shows up with empty help."""
    parser = argparse.ArgumentParser(prog="graphrt")
    parser.add_argument("--documented", help="says what it does")
    parser.add_argument("--bare")
    assert [f.flags for f in reference.flags(parser) if not f.help] == ["--bare"]


def test_every_metric_has_help(reference: ModuleType) -> None:
    metrics = reference.metrics()
    names = {m.name for m in metrics}
    assert {
        "ovms_requests_success",
        "ovms_request_time_us",
        "graphrt_llm_time_to_first_token_seconds",
        "graphrt_llm_generated_tokens_total",
        "graphrt_pipeline_requests_total",
        "graphrt_encoder_batch_size",
    } <= names
    undocumented = [m.name for m in metrics if not m.help.strip() or m.help == m.name]
    assert not undocumented, f"metrics without help text: {undocumented}"
    assert all(m.type in {"counter", "gauge", "histogram"} for m in metrics)


def test_every_metric_the_server_renders_is_listed(reference: ModuleType) -> None:
    """What a fresh server's /metrics shows is in the reference (the AST scan misses nothing
    the registry itself defines)."""
    from graphrt.observability.metrics import Metrics

    rendered = Metrics().render().decode()
    shown = {line.split()[2] for line in rendered.splitlines() if line.startswith("# HELP ")}
    listed = {m.name.removesuffix("_total") for m in reference.metrics()}
    assert {name.removesuffix("_total") for name in shown} <= listed


def _section(page: str, heading: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    assert f"\n## {heading}\n" in text, f"{page} has no '## {heading}' section"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def test_the_operations_tables_name_only_real_flags_and_metrics(reference: ModuleType) -> None:
    """The hand-written tables in docs/operations.md explain flags and metrics together; each
    name they use must still exist (the generated reference lists them all)."""
    flags = set(re.findall(r"`(--[a-z_-]+)", _section("operations.md", "Flags")))
    known_flags = {name for flag in reference.flags() for name in flag.flags.split(", ")}
    assert flags and not flags - known_flags, f"unknown flags: {sorted(flags - known_flags)}"
    metrics = set(re.findall(r"`((?:ovms|graphrt)_[a-z_]+)`", _section("operations.md", "Metrics")))
    known_metrics = {m.name for m in reference.metrics()}
    unknown = metrics - known_metrics
    assert metrics and not unknown, f"unknown metrics: {sorted(unknown)}"
