"""ruff and mypy --strict are part of the suite, so style and typing cannot drift unnoticed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import model_cache_dir

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = [
    "graphruntime",
    "graphrt",
    "calculators",
    "servables",
    "pyovms",
    "benchmarks",
    "tools",
    "tests",
    "examples",
    "deploy",
]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *command], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_lint_and_format() -> None:
    lint = run("ruff", "check", *PACKAGES)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    formatting = run("ruff", "format", "--check", *PACKAGES)
    assert formatting.returncode == 0, formatting.stdout + formatting.stderr


def test_mypy_strict() -> None:
    # mypy's incremental cache lives in the test cache, so a fresh clone on a machine that ran the
    # suite before checks only what changed (~50 s of a cold check on two cores otherwise).
    result = run(
        "mypy",
        "--cache-dir",
        str(model_cache_dir() / "mypy"),
        "graphruntime",
        "calculators",
        "servables",
        "graphrt",
        "pyovms",
        "benchmarks",
        "tools",
    )
    assert result.returncode == 0, result.stdout + result.stderr
