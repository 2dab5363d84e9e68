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


def other_owners() -> dict[str, list[str]]:
    """Distributions besides graphrt that install files under a shared name (slow: ~0.3 s)."""
    owners = importlib.metadata.packages_distributions()
    found = {}
    for name in SHARED_NAMES:
        others = sorted(set(owners.get(name, ())) - {DISTRIBUTION})
        if others:
            found[name] = others
    return found
