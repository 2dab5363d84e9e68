"""Code blocks the documentation marks to run, run as written.

Convention: a fence right after the HTML comment `<!-- test: run -->` is run by
tests/unit/docs/test_runnable_blocks.py (Python blocks in one namespace per page, in order; bash
blocks with the venv's `graphrt` on PATH). Blocks that need a model server or a download are
covered by the e2e tests named where they moved (see test_readme.py and tests/e2e/).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
RUNNABLE = re.compile(r"<!-- test: run -->\n```(\w+)\n(.*?)```", re.DOTALL)


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def runnable_blocks(page: Path) -> list[tuple[str, str]]:
    """(language, code) of each block marked runnable on `page`, in page order."""
    return RUNNABLE.findall(page.read_text(encoding="utf-8"))


PAGES = [page for page in pages() if runnable_blocks(page)]


def test_runnable_blocks_are_found() -> None:
    names = {page.name for page in PAGES}
    assert {"README.md", "graphs.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_example"}
    bin_dir = str(Path(sys.executable).parent)
    for language, code in runnable_blocks(page):
        if language == "python":
            exec(compile(code, str(page), "exec"), namespace)
        elif language in ("bash", "sh", "shell"):
            env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
            result = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", code],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert result.returncode == 0, f"{page}:\n{code}\n{result.stdout}{result.stderr}"
        else:
            pytest.fail(f"{page}: no runner for a runnable {language!r} block")
