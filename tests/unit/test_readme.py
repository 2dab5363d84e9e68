"""The README's Python examples run as written (documentation that cannot rot)."""

from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def block_with(marker: str) -> str:
    matches = [block for block in BLOCKS if marker in block]
    assert len(matches) == 1, f"expected one README block containing {marker!r}"
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
    ci = (Path(__file__).resolve().parents[2] / ".ci" / "run").read_text()
    test_command = next(line for line in README.splitlines() if "pytest" in line).strip()
    assert test_command in ci, "the README's test command must be the one .ci/run runs"
    assert "graphrt serve" in README.split("```")[1], "first command block serves the default model"
