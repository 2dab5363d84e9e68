"""graphrt installs five top-level import names: graphruntime, calculators, servables, graphrt
and pyovms (the module OVMS's Python-node scripts import).

calculators and servables are common words, and another distribution may install a package of
the same name; OVMS's own pyovms may be on PYTHONPATH. Whichever directory comes first on
sys.path then wins, and graphrt fails far from the cause (`No module named 'calculators.llm'`).
`check_importable` runs before the application imports any of them and names the culprit;
`other_owners` finds distributions that share the names in site-packages (theirs and ours
overwrite each other's files), for a warning at server start.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

DISTRIBUTION = "graphrt"
SHARED_NAMES = ("calculators", "servables", "pyovms")
HOME = Path(__file__).resolve().parents[1]  # the directory holding graphruntime/


class ShadowedPackageError(ImportError):
    """Another package answers to one of graphrt's top-level names."""


def check_importable() -> None:
    """Raise ShadowedPackageError unless each shared name resolves to graphrt's own package."""
    for name in SHARED_NAMES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        expected = HOME / name / "__init__.py"
        if origin is None or Path(origin).resolve() != expected:
            found = origin or (
                f"a namespace package at {list(spec.submodule_search_locations or [])}"
                if spec is not None
                else "nothing"
            )
            raise ShadowedPackageError(
                f"graphrt's '{name}' package should be {expected}, but '{name}' resolves to "
                f"{found}: another installed package (or a directory on PYTHONPATH or in the "
                "working directory) uses the same top-level name. Uninstall it, or run graphrt "
                "from its own virtual environment."
            )


def _top_level_names(distribution: importlib.metadata.Distribution) -> set[str]:
    """The import names a distribution installs: its top_level.txt, else the first part of each
    path its RECORD lists (what importlib.metadata.packages_distributions infers, without
    building a path object per file: that took ~0.7 s of every server start)."""
    listed = distribution.read_text("top_level.txt")
    if listed is not None:
        return set(listed.split())
    record = distribution.read_text("RECORD") or ""
    firsts = (line.split(",", 1)[0].split("/", 1)[0] for line in record.splitlines())
    return {first.removesuffix(".py") for first in firsts}


def other_owners() -> dict[str, list[str]]:
    """Distributions besides graphrt that install files under a shared name."""
    found: dict[str, set[str]] = {}
    for distribution in importlib.metadata.distributions():
        shared = _top_level_names(distribution).intersection(SHARED_NAMES)
        name = distribution.metadata["Name"] if shared else None
        if name is None or name == DISTRIBUTION:
            continue
        for each in shared:
            found.setdefault(each, set()).add(name)
    return {name: sorted(found[name]) for name in SHARED_NAMES if name in found}
