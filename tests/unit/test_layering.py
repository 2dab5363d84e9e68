"""Dependencies point inward (design.md §3): this walks every import and enforces the table.

graphruntime, the graph library, imports only the stdlib and protobuf, and names no module of the
layers above it in a string it could import by; servables never import graphruntime, calculators
or the application; calculators never import the application (graphrt) or aiohttp; nothing below
the application imports it; inside the application, folders import only their own layer and the
layers below (APP_LAYERS); and pyovms, the name OVMS's Python-node scripts import, only
re-exports servables' Tensor.
"""

from __future__ import annotations

import ast
import re
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


def test_graphruntime_uses_only_stdlib_and_protobuf() -> None:
    for path in modules("graphruntime"):
        for name in imports_of(path):
            allowed = top(name) in STDLIB or name.startswith(("google.protobuf", "graphruntime"))
            assert allowed, f"{path.relative_to(ROOT)} imports {name}"


# Calls that import a module named by a string: the import statements above never see them.
UPPER_LAYERS = {"calculators", "servables", "graphrt"}
DYNAMIC_IMPORTS = {"import_module", "__import__", "find_spec", "spec_from_file_location"}
# A string that names a module (or `module:attribute`) of the upper layers.
# (Not graphrt's: "graphrt.calculators" is also the name of an entry-point group.)
UPPER_LAYER_MODULE = re.compile(r"^(calculators|servables)(\.\w+)+(:\w+)?$")


def docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of `tree`'s module, classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def upper_layer_module_strings(source: str, label: str) -> list[str]:
    """Where `source` names a calculators/servables module in a string it could import by: the
    string arguments of import_module/__import__/find_spec calls (f-strings included, by their
    literal parts), and any other string that is a dotted calculators./servables. module name
    (such as a constant later passed to import_module). Docstrings only describe."""
    tree = ast.parse(source, label)
    seen = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name not in DYNAMIC_IMPORTS:
            continue
        for constant in ast.walk(node):
            if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                seen.add(id(constant))
                if constant.value.split(".")[0].split(":")[0] in UPPER_LAYERS:
                    found.append((node.lineno, f"{name}({constant.value!r})"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in seen
            and UPPER_LAYER_MODULE.match(node.value)
        ):
            found.append((node.lineno, repr(node.value)))
    return [f"{label}:{line}: {what}" for line, what in sorted(found)]


def test_graphruntime_imports_no_upper_layer_by_name() -> None:
    """The graph library never loads a calculator, servable or application module by name either
    (importlib, a module path in a string): what a graph needs of them arrives through their own
    registration (entry points, @register_calculator, the options_type a calculator declares).
    Only the application, graphrt/, wires packages together."""
    found = []
    for path in modules("graphruntime"):
        found += upper_layer_module_strings(
            path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        )
    assert not found, "graphruntime names upper-layer modules:\n" + "\n".join(found)


def test_the_name_scan_sees_dynamic_imports() -> None:
    """The scan above catches the forms it is meant to, and not prose."""
    code = (
        '"""Docstrings may mention calculators.llm.llm_calculator_pb2."""\n'
        "import importlib\n"
        'importlib.import_module("calculators.llm.llm_calculator_pb2")\n'
        "__import__(f'servables.{kind}')\n"
        'PLUGIN = "calculators.llm.http_llm:HttpLLMCalculator"\n'
        'TEXT = "calculators and servables are layers"\n'
        'importlib.import_module("graphruntime.stream_handlers")\n'
    )
    assert upper_layer_module_strings(code, "probe.py") == [
        "probe.py:3: import_module('calculators.llm.llm_calculator_pb2')",
        "probe.py:4: __import__('servables.')",
        "probe.py:5: 'calculators.llm.http_llm:HttpLLMCalculator'",
    ]


def test_servables_do_not_import_graphs_or_the_application() -> None:
    for path in modules("servables"):
        for name in imports_of(path):
            assert top(name) not in {"graphruntime", "calculators", "graphrt"}, (
                f"{path.relative_to(ROOT)} imports {name}"
            )
            assert not name.startswith("aiohttp.web"), f"{path.relative_to(ROOT)} imports {name}"


def test_calculators_do_not_import_the_application_layer() -> None:
    for path in modules("calculators"):
        for name in imports_of(path):
            assert top(name) not in {"graphrt", "aiohttp", "grpc"}, (
                f"{path.relative_to(ROOT)} imports {name}"
            )


def test_pyovms_is_only_the_name_scripts_import() -> None:
    """pyovms, the module OVMS's Python-node scripts import, re-exports servables' Tensor; the
    packages themselves use servables.python_model, never pyovms."""
    for path in modules("pyovms"):
        for name in imports_of(path):
            assert name.startswith("servables.python_model"), (
                f"{path.relative_to(ROOT)} imports {name}"
            )
    for package in ("graphruntime", "calculators", "servables", "graphrt"):
        for path in modules(package):
            assert "pyovms" not in {top(name) for name in imports_of(path)}, (
                f"{path.relative_to(ROOT)} imports pyovms"
            )


# ------------------------------------------------------------------ runtime imports and cycles

PACKAGES = ("graphruntime", "calculators", "servables", "graphrt", "pyovms")

# graphruntime's core, bottom to top: a module may import (at run time) its own layer and the
# layers below it, never one above. Imports needed only for annotations go under TYPE_CHECKING.
# A new core module must be placed here.
CORE_LAYERS: tuple[tuple[str, ...], ...] = (
    # the shared vocabulary
    ("errors", "tags", "timestamp", "services", "_proto"),
    # values and descriptions made of it
    ("packet", "config_text", "config", "options_text", "executors", "observe"),
    # ports and contracts, the calculator base class, stream queues, pictures and text of a config
    ("contract", "calculator", "streams", "drawing", "layout", "config_print"),
    # what a running calculator sees, and how its inputs are grouped into calls
    ("context", "stream_handlers"),
    # names → classes, and → subgraphs
    ("registry", "function", "subgraphs"),
    # a checked graph (its subgraphs expanded first) and the resources its nodes declare
    ("subgraph_expansion", "node_checks", "validation", "resources"),
    # what a run keeps per node, and holding back its feeders while a queue is full
    ("node_runtime", "flow_control"),
    # running a graph, and watching it run
    ("scheduler", "stats", "profiler", "trace_file"),
    # the public graph APIs
    ("graph", "testing", "calculator_graph"),
    # the package's re-exports
    ("__init__",),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


PROJECT_MODULES = {
    module_name(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")
}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(name: str) -> set[str]:
    """Project modules `name` imports when it runs (function-level imports included), except
    under `if TYPE_CHECKING:`. `from a.b import c` counts as a.b.c when that is a module, else
    a.b; a parent package's __init__ is not counted for a submodule import."""
    path = PROJECT_MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for statement in child.orelse:
                    visit(statement)
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parents = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*parents, base] if base else parents)
                submodules = {f"{base}.{alias.name}" for alias in child.names}
                found.update(submodules & PROJECT_MODULES.keys() or {base})
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    resolved = set()
    for imported in found:
        parts = imported.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in PROJECT_MODULES:
                if candidate != name:
                    resolved.add(candidate)
                break
    return resolved


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search, iterative)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if root in state:
            continue
        path = [root]
        iterators = [iter(sorted(graph[root]))]
        state[root] = 1
        while iterators:
            following = next(iterators[-1], None)
            if following is None:
                state[path.pop()] = 2
                iterators.pop()
            elif state.get(following) == 1:
                return [*path[path.index(following) :], following]
            elif following not in state:
                state[following] = 1
                path.append(following)
                iterators.append(iter(sorted(graph[following])))
    return None


def test_find_cycle_finds_one() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_the_projects_modules() -> None:
    graph = {name: runtime_imports(name) for name in PROJECT_MODULES}
    cycle = find_cycle(graph)
    assert cycle is None, "runtime import cycle: " + " -> ".join(cycle or [])


def core_layer(name: str) -> int:
    """Index in CORE_LAYERS of a graphruntime core module (subpackages share their layer)."""
    relative = name.removeprefix("graphruntime").lstrip(".") or "__init__"
    head = relative.split(".")[0]
    for index, layer in enumerate(CORE_LAYERS):
        if head in layer:
            return index
    raise AssertionError(f"{name} is in no layer: add it to CORE_LAYERS in {Path(__file__).name}")


def test_core_modules_import_only_their_layer_and_below() -> None:
    core = [name for name in PROJECT_MODULES if name.split(".")[0] == "graphruntime"]
    for name in core:
        layer = core_layer(name)
        for imported in runtime_imports(name):
            above = core_layer(imported) > layer
            assert not above, (
                f"{name} (layer {layer}) imports {imported} (layer {core_layer(imported)}) at "
                "run time; import it under TYPE_CHECKING if only annotations need it"
            )


# The application, top to bottom: a folder (or top-level module) of graphrt may import at run time
# its own layer and the layers below it, never one above. A new folder must be placed here.
APP_LAYERS: tuple[tuple[str, ...], ...] = (
    # the command line and `python -m graphrt`
    ("cli", "__main__"),
    # the composition root: starts the frontends over the repository, drains, stops
    ("server",),
    # the frontends, and the one map from errors to what they answer
    ("http", "kserve", "error_map"),
    # what is served: settings, repository, graph servables, policies
    ("serving",),
    # graphs written from flags and model layouts; metrics, tracing, request ids
    ("export", "observability"),
    # the application's errors; the package's import-time check
    ("errors", "own_packages", "__init__"),
)


def app_layer(name: str) -> int:
    relative = name.removeprefix("graphrt").lstrip(".") or "__init__"
    head = relative.split(".")[0]
    for index, layer in enumerate(APP_LAYERS):
        if head in layer:
            return index
    raise AssertionError(f"{name} is in no layer: add it to APP_LAYERS in {Path(__file__).name}")


def test_application_folders_import_only_their_layer_and_below() -> None:
    for name in PROJECT_MODULES:
        if name.split(".")[0] != "graphrt":
            continue
        layer = app_layer(name)
        for imported in runtime_imports(name):
            if imported.split(".")[0] != "graphrt" or imported == "graphrt":
                continue
            assert app_layer(imported) >= layer, (
                f"{name} ({APP_LAYERS[layer][0]}) imports {imported} "
                f"({APP_LAYERS[app_layer(imported)][0]}), a layer above it"
            )


def test_nothing_below_the_application_imports_it() -> None:
    for package in ("graphruntime", "calculators", "servables"):
        for path in modules(package):
            for name in imports_of(path):
                assert top(name) != "graphrt", f"{path.relative_to(ROOT)} imports {name}"
