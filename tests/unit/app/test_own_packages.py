"""graphrt's top-level `calculators`, `servables` and `pyovms` names: shadowing is reported,
not obscure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphrt import own_packages


def test_graphrts_own_packages_pass() -> None:
    own_packages.check_importable()


def test_other_distributions_claiming_the_names_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert own_packages.other_owners() == {}
    info = tmp_path / "calculators_toolkit-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: calculators-toolkit\nVersion: 1.0\n"
    )
    (info / "top_level.txt").write_text("calculators\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert own_packages.other_owners() == {"calculators": ["calculators-toolkit"]}


def test_a_distribution_without_top_level_txt_is_read_from_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "servekit-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: servekit\nVersion: 2.0\n")
    (info / "RECORD").write_text(
        "servables/__init__.py,sha256=x,1\npyovms.py,sha256=y,2\n"
        "servekit-2.0.dist-info/RECORD,,\nservekit/core.py,sha256=z,3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert own_packages.other_owners() == {"servables": ["servekit"], "pyovms": ["servekit"]}


@pytest.mark.parametrize("name", own_packages.SHARED_NAMES)
def test_a_shadowing_package_is_named_before_anything_else_fails(tmp_path: Path, name: str) -> None:
    shadow = tmp_path / name
    shadow.mkdir()
    (shadow / "__init__.py").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "graphrt.cli.main", "graph", "show", "x.pbtxt"],
        cwd=tmp_path,  # `python -m` puts the working directory first on sys.path
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith("graphrt.own_packages.ShadowedPackageError")
    assert f"'{name}' resolves to {shadow / '__init__.py'}" in last_line
