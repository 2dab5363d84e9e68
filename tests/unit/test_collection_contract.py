"""The README's test command must work on a machine with only Python and pip.

Tests that need a system tool are marked `system` and check for the tool when they run, never
at import: otherwise one missing tool stops collection of the whole suite (it once did). This
collects every test, system ones included, with a PATH on which no tool can be found.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYSTEM_MODULES = ("tests/e2e/test_container_image.py", "tests/e2e/test_nginx.py")


def _collect(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=REPO,
        env={**os.environ, "PATH": str(empty)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_collection_needs_no_system_tool_and_deselects_the_system_tests(tmp_path: Path) -> None:
    # Deselection happens after collection: the system modules are still imported here, so a
    # tool check at import would show up as a collection error.
    result = _collect(tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    summary = output.strip().splitlines()[-1]
    assert "error" not in summary.lower(), output[-4000:]
    deselected = re.search(r"\((\d+) deselected\)", summary)
    assert deselected and int(deselected.group(1)) > 0, summary
    collected = [line for line in result.stdout.splitlines() if "::" in line]
    assert collected
    assert not any(line.startswith(SYSTEM_MODULES) for line in collected)
    assert "tests/unit/app/test_cli_graph.py::test_show_svg" not in collected
