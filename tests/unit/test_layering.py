"""Dependencies point inward (design.md §3): this walks every import and enforces the table.

graphruntime core imports only the stdlib and protobuf; servables never import graphruntime or
calculators; calculators never import the application layer (graphruntime.server) or aiohttp;
nothing outside graphruntime.server imports it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STDLIB = set(sys.stdlib_module_names)


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules(package: str) -> list[Path]:
    return [p for p in (ROOT / package).rglob("*.py") if not p.name.endswith("_pb2.py")]


def top(name: str) -> str:
    return name.split(".")[0]


def test_graphruntime_core_uses_only_stdlib_and_protobuf() -> None:
    for path in modules("graphruntime"):
        if "server" in path.relative_to(ROOT / "graphruntime").parts:
            continue
        for name in imports_of(path):
            allowed = top(name) in STDLIB or name.startswith(("google.protobuf", "graphruntime"))
            allowed = allowed and not name.startswith("graphruntime.server")
            assert allowed, f"{path.relative_to(ROOT)} imports {name}"


def test_servables_do_not_import_graphs_or_the_server() -> None:
    for path in modules("servables"):
        for name in imports_of(path):
            assert top(name) not in {"graphruntime", "calculators"}, (
                f"{path.relative_to(ROOT)} imports {name}"
            )
            assert not name.startswith("aiohttp.web"), f"{path.relative_to(ROOT)} imports {name}"


def test_calculators_do_not_import_the_application_layer() -> None:
    for path in modules("calculators"):
        for name in imports_of(path):
            assert not name.startswith("graphruntime.server"), (
                f"{path.relative_to(ROOT)} imports {name}"
            )
            assert top(name) not in {"aiohttp", "grpc"}, f"{path.relative_to(ROOT)} imports {name}"
