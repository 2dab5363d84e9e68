"""The documentation site builds with `mkdocs build --strict`: no broken link or anchor, no page
missing from the nav, the generated reference pages present, nothing fetched from the network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_site_builds_strict_and_offline(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "https_proxy": "http://127.0.0.1:9"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for page in ("index", "reference/calculators", "reference/flags", "reference/metrics"):
        assert (site / page.removesuffix("index") / "index.html").is_file(), page
    calculators = (site / "reference" / "calculators" / "index.html").read_text(encoding="utf-8")
    assert "GateCalculatorOptions" in calculators and "HttpLLMCalculator" in calculators
    flags = (site / "reference" / "flags" / "index.html").read_text(encoding="utf-8")
    assert "--rest_port" in flags and "graphrt graph profile" in flags
    api = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert "wait_until_done" in api and "CalculatorRunner" in api
    # No web fonts or other remote assets: the site works offline.
    index = (site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis.com" not in index and "fonts.gstatic.com" not in index


def test_moved_docs_pages_keep_no_link_to_the_old_readme_sections() -> None:
    """README sections moved to docs/: a `README.md#section` link would now point nowhere."""
    for page in (ROOT / "docs").rglob("*.md"):
        assert "README.md#" not in page.read_text(encoding="utf-8"), page
