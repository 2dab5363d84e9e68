"""The README's commands are CI's, and the Python examples that moved from the README to
docs/graphs.md run as written (documentation that cannot rot). tests/unit/docs/ runs every block
marked `<!-- test: run -->`, these among them; this keeps the checks on what each one does."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
# "Writing a calculator" moved from the README to docs/graphs.md.
GRAPHS = (ROOT / "docs" / "graphs.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", GRAPHS, re.DOTALL)


def block_with(marker: str) -> str:
    matches = [block for block in BLOCKS if marker in block]
    assert len(matches) == 1, f"expected one docs/graphs.md block containing {marker!r}"
    return matches[0]


def test_custom_calculator_example_and_its_unit_test_run() -> None:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    exec(block_with("class PromptGuardCalculator"), namespace)
    exec(block_with("CalculatorRunner("), namespace)


def test_function_calculator_example_runs() -> None:
    from graphruntime import Packet
    from graphruntime.testing import CalculatorRunner

    exec(block_with("def ShoutCalculator"), {"__name__": "readme_example"})
    runner = CalculatorRunner(
        'calculator: "ShoutCalculator" input_stream: "TEXT:a" output_stream: "TEXT:b"'
    )
    runner.add("TEXT", Packet("hi", 0))
    runner.run()
    assert [p.payload for p in runner.outputs("TEXT")] == ["HI!"]


def test_readme_commands_match_ci() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in README.splitlines() if "pytest" in line).strip()
    assert test_command in ci, "the README's test command must be the one .ci/run runs"
    assert "graphrt serve" in README.split("```")[1], "first command block serves the default model"


def test_readme_tour_graph_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The README's 30-second tour: a Python calculator in a graph, run from Python."""
    tour = [b for b in re.findall(r"```python\n(.*?)```", README, re.DOTALL) if "Graph(" in b]
    assert len(tour) == 1
    exec(tour[0], {"__name__": "readme_example"})
    assert capsys.readouterr().out == "HELLO GRAPHS!\n"
