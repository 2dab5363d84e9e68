"""Where subgraphs come from: graph files that declare a `type:`, and Python.

A subgraph is a CalculatorGraphConfig with a `type`; a node whose `calculator` names that type
is replaced by the subgraph's nodes when the graph loads (subgraph_expansion.py). Types are found,
in this order, among those registered from Python (`register_subgraph`, or an entry point of the
`graphrt.subgraphs` group, as calculators are), then in the `.pbtxt` files of the search path:
files the path names one by one, the directory of the graph being loaded, then the directories
given to the loader; the first place that has a type wins. A file is found by its `type:` and by
its name in CamelCase (face_detection_cpu.pbtxt is FaceDetectionCpu), since MediaPipe's build
registers its files by name and a few of them carry a stale `type:`. Where several files of one
directory declare a type, the one named after it is used; otherwise using it is an error. A name
that is a registered calculator is never looked up in the files, so a stray file cannot replace a
built-in calculator. Files are read once and re-read only when they change.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, overload

from google.protobuf.message import Message

from graphruntime._proto import calculator_pb2
from graphruntime.config import GraphConfig, parse_graph_config
from graphruntime.errors import GraphConfigError
from graphruntime.registry import calculators

SUBGRAPH_ENTRY_POINTS = "graphrt.subgraphs"

M = TypeVar("M", bound=Message)
SubgraphResult = GraphConfig | calculator_pb2.CalculatorGraphConfig | str
SubgraphFactory = Callable[["SubgraphContext"], SubgraphResult]
F = TypeVar("F", bound=SubgraphFactory)

# Only files with a line starting with `type:` are parsed to see whether they are subgraphs.
_TYPE_LINE = re.compile(r"^\s*type\s*:", re.MULTILINE)


@dataclass(frozen=True)
class SubgraphContext:
    """What a Python subgraph is built from: the node that uses it, in the graph that holds it."""

    node: calculator_pb2.CalculatorGraphConfig.Node
    config: GraphConfig
    node_index: int

    def options(self, message_type: type[M]) -> M | None:
        """The using node's options of `message_type` (its `options` or `node_options`)."""
        return self.config.decode_options(("node", self.node_index), message_type)

    def single_node_graph(self, calculator: str | None = None) -> GraphConfig:
        """A graph of the using node alone (as `calculator`, when given), its ports declared as
        the graph's: MediaPipe's MakeSingleNodeGraph, for a subgraph that picks which calculator
        runs. The node keeps its options, including those of types graphrt does not know."""
        proto = calculator_pb2.CalculatorGraphConfig()
        node = proto.node.add()
        node.CopyFrom(self.node)
        if calculator:
            node.calculator = calculator
        for field in ("input_stream", "output_stream", "input_side_packet", "output_side_packet"):
            getattr(proto, field).extend(getattr(node, field))
        return self.config.with_nodes(proto, [self.config.node_parts(self.node_index)])


@dataclass(frozen=True)
class SubgraphDefinition:
    """A subgraph type and how to build its config; `origin` names it in messages."""

    type: str
    origin: str
    build: Callable[[SubgraphContext], GraphConfig]


def _as_config(result: SubgraphResult, origin: str) -> GraphConfig:
    if isinstance(result, GraphConfig):
        return result
    if isinstance(result, calculator_pb2.CalculatorGraphConfig):
        return GraphConfig.from_proto(result, origin)
    return parse_graph_config(result, origin)


def _python_definition(name: str, item: Any) -> SubgraphDefinition:
    origin = f"<subgraph {name}>"
    if isinstance(item, str | GraphConfig | calculator_pb2.CalculatorGraphConfig):
        config = _as_config(item, origin)
        return SubgraphDefinition(name, origin, lambda _context: config)
    if callable(item):
        module = getattr(item, "__module__", "?")
        origin = f"{module}.{getattr(item, '__qualname__', name)}"
        return SubgraphDefinition(name, origin, lambda context: _as_config(item(context), origin))
    raise TypeError(f"subgraph {name!r} must be graph text, a config or a function, not {item!r}")


class SubgraphRegistry:
    """Subgraphs registered from Python, by type name."""

    def __init__(self) -> None:
        self._items: dict[str, SubgraphDefinition] = {}
        self._lock = threading.Lock()
        self._entry_points: dict[str, importlib.metadata.EntryPoint] | None = None

    def _published(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The `graphrt.subgraphs` entry points, read once: every node of every graph asks."""
        if self._entry_points is None:
            points = importlib.metadata.entry_points(group=SUBGRAPH_ENTRY_POINTS)
            self._entry_points = {point.name: point for point in points}
        return self._entry_points

    def register(self, name: str, item: SubgraphFactory | SubgraphResult) -> None:
        definition = _python_definition(name, item)
        with self._lock:
            self._items[name] = definition

    def unregister(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def get(self, name: str) -> SubgraphDefinition | None:
        found = self._items.get(name)
        if found is not None:
            return found
        entry_point = self._published().get(name)
        if entry_point is None:
            return None
        self.register(name, entry_point.load())
        return self._items[name]

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._published()))


subgraph_registry = SubgraphRegistry()


@overload
def register_subgraph(factory: F, /) -> F: ...
@overload
def register_subgraph(*, name: str) -> Callable[[F], F]: ...
def register_subgraph(factory: F | None = None, /, *, name: str | None = None) -> Any:
    """Function decorator: the function builds the subgraph named after it (or `name`).

    It gets a `SubgraphContext` (the using node and its options) and returns graph text, a
    `GraphConfig` or a CalculatorGraphConfig. For a fixed subgraph, call
    `subgraph_registry.register(name, text)` instead.
    """

    def register(function: F) -> F:
        subgraph_registry.register(name or function.__name__, function)
        return function

    return register(factory) if factory is not None else register


@dataclass(frozen=True)
class _FileEntry:
    stamp: tuple[int, int]
    type: str | None
    config: GraphConfig | None


_file_cache: dict[str, _FileEntry] = {}
_file_lock = threading.Lock()


def _read_subgraph_file(path: str) -> _FileEntry:
    """The file's subgraph type and config, or no type when it is not a subgraph."""
    stat = os.stat(path)
    stamp = (stat.st_mtime_ns, stat.st_size)
    with _file_lock:
        cached = _file_cache.get(path)
    if cached is not None and cached.stamp == stamp:
        return cached
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    entry = _FileEntry(stamp, None, None)
    if _TYPE_LINE.search(text):
        config = parse_graph_config(text, path)
        if config.proto.type:
            entry = _FileEntry(stamp, config.proto.type, config)
    with _file_lock:
        _file_cache[path] = entry
    return entry


class SubgraphLibrary:
    """The subgraphs a graph can use: Python's, then the search path's files."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = ()) -> None:
        self.paths = tuple(os.fspath(p) for p in paths)
        self._files: dict[str, tuple[str, GraphConfig] | list[str]] | None = None
        self._found: dict[str, SubgraphDefinition | None] = {}

    def for_graph(self, graph_path: str | None) -> SubgraphLibrary:
        """This library with the graph's own directory searched first, after the files the path
        names one by one (the way to pick one of several files that declare a type)."""
        if not graph_path:
            return self
        directory = os.path.dirname(os.path.abspath(graph_path))
        files = [p for p in self.paths if os.path.isfile(p)]
        others = [p for p in self.paths if p not in files and os.path.abspath(p) != directory]
        return SubgraphLibrary([*files, directory, *others])

    def find(self, name: str) -> SubgraphDefinition | None:
        """The subgraph named `name`, or None when it is not one (a calculator, say)."""
        if name not in self._found:
            self._found[name] = self._find(name)
        return self._found[name]

    def _find(self, name: str) -> SubgraphDefinition | None:
        found = subgraph_registry.get(name)
        if found is not None:
            return found
        if not self.paths or calculators.get(name) is not None:
            return None
        file = self._file_index().get(name)
        if file is None:
            return None
        if isinstance(file, list):
            raise GraphConfigError(
                f'Subgraph type "{name}" is declared by {len(file)} files: {", ".join(file)}; '
                "give the one to use on the subgraph path by itself, or name it "
                f"{_file_name(name)}."
            )
        path, config = file
        return SubgraphDefinition(name, path, lambda _context: config)

    def _file_index(self) -> dict[str, tuple[str, GraphConfig] | list[str]]:
        """Type → (file, config), or the files that declare it when the choice is ambiguous."""
        if self._files is None:
            index: dict[str, tuple[str, GraphConfig] | list[str]] = {}
            for directory in _pbtxt_files(self.paths):
                declared: dict[str, list[tuple[str, GraphConfig]]] = {}
                for path in directory:
                    entry = _read_subgraph_file(path)
                    if entry.type is not None and entry.config is not None:
                        declared.setdefault(entry.type, []).append((path, entry.config))
                for files in list(declared.values()):
                    for path, config in files:  # also found by its file name, as Bazel registers
                        declared.setdefault(_type_name(path), [(path, config)])
                for type_name, files in declared.items():
                    if type_name not in index:  # an earlier directory of the search path wins
                        index[type_name] = _choose(type_name, files)
            self._files = index
        return self._files


def _file_name(type_name: str) -> str:
    """The file a type is expected in: FaceDetectionCpu → face_detection_cpu.pbtxt."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", type_name).lower() + ".pbtxt"


def _type_name(path: str) -> str:
    """The type a file is registered as by its name: face_detection_cpu.pbtxt → FaceDetectionCpu."""
    stem = os.path.basename(path).removesuffix(".pbtxt")
    return "".join(part[:1].upper() + part[1:] for part in stem.split("_"))


def _choose(
    type_name: str, files: list[tuple[str, GraphConfig]]
) -> tuple[str, GraphConfig] | list[str]:
    """One file of a directory for a type; of several, the one named after the type (MediaPipe's
    own modules have copies whose `type:` was never updated)."""
    if len(files) == 1:
        return files[0]
    named = [f for f in files if os.path.basename(f[0]) == _file_name(type_name)]
    return named[0] if len(named) == 1 else [path for path, _ in files]


def _pbtxt_files(paths: Sequence[str]) -> list[list[str]]:
    """The `.pbtxt` files directly in each directory, a list per directory (a file path is a
    directory of its own)."""
    found: list[list[str]] = []
    for path in dict.fromkeys(os.path.abspath(p) for p in paths):
        if os.path.isfile(path):
            found.append([path])
        elif os.path.isdir(path):
            names = sorted(name for name in os.listdir(path) if name.endswith(".pbtxt"))
            found.append([os.path.join(path, name) for name in names])
    return found
