"""The image's build context holds every package the wheel installs.

The Dockerfile copies package folders one by one and .dockerignore lets only those through, so a
new top-level package (as `graphrt/` was when the application left `graphruntime/`) builds a
wheel without it, and the image fails only at its first import — caught here in a second
rather than in the buildah system test.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def installed_packages() -> set[str]:
    """The top-level folders setuptools' package finder takes into the wheel."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # [tool.setuptools.packages.find]'s one-line list (tomllib is Python 3.11+; we support 3.10).
    (listed,) = re.findall(r"^include = (\[.*\])$", pyproject, flags=re.MULTILINE)
    patterns: list[str] = ast.literal_eval(listed)
    names = {pattern.rstrip("*") for pattern in patterns}
    return {name for name in names if (ROOT / name / "__init__.py").is_file()}


def test_every_installed_package_is_copied_into_the_build() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    copied = set(re.findall(r"^COPY (\w+) /src/\1$", dockerfile, flags=re.MULTILINE))
    assert installed_packages() - copied == set()


def test_every_installed_package_passes_the_dockerignore() -> None:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    allowed = {line[1:] for line in lines if line.startswith("!")}
    assert installed_packages() - allowed == set()


def test_the_package_list_is_not_empty() -> None:
    assert {"graphruntime", "graphrt", "pyovms"} <= installed_packages()
