"""Name → implementation registries for calculators and input stream handlers.

graph.pbtxt names implementations by string, so every pluggable piece is found through a registry.
Besides explicit registration (the decorators), a registry consults a Python entry-point group
on a miss, which is how installed packages (graphrt's own calculators included) make their
calculators available without being imported up front: the entry point's name is the calculator
name and its value the module or class to load, so only what a graph uses gets imported.
A name of the form `package.module:ClassName` imports that class directly, so a graph can use
a calculator from the user's own code with no registration at all.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

from graphruntime.calculator import Calculator
from graphruntime.stream_handlers import BUILTIN_HANDLERS, InputStreamHandler

T = TypeVar("T")
C = TypeVar("C", bound=type[Calculator])
H = TypeVar("H", bound=type[InputStreamHandler])

logger = logging.getLogger(__name__)

CALCULATOR_ENTRY_POINTS = "graphrt.calculators"
HANDLER_ENTRY_POINTS = "graphrt.input_stream_handlers"


class RegistryError(LookupError):
    """A `module:Class` name that cannot be imported; the message says why."""


class Registry(Generic[T]):
    def __init__(self, kind: str, entry_point_group: str, base: type) -> None:
        self.kind = kind
        self.entry_point_group = entry_point_group
        self.base = base
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        self._published: dict[str, importlib.metadata.EntryPoint] | None = None

    def register(self, name: str, item: T) -> None:
        with self._lock:
            existing = self._items.get(name)
            if existing is not None and existing is not item:
                logger.warning(
                    "%s %r is registered again; the new one replaces the old", self.kind, name
                )
            self._items[name] = item

    def unregister(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)

    def _entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """The group's entry points, read once: reading them costs ~20 ms, and a graph whose
        calculators are not installed (or a subgraph search) asks once per name."""
        if self._published is None:
            points = importlib.metadata.entry_points(group=self.entry_point_group)
            self._published = {ep.name: ep for ep in points}
        return self._published

    def get(self, name: str) -> T | None:
        """The implementation registered as `name`, loading its entry point if needed."""
        item = self._items.get(name)
        if item is not None:
            return item
        if ":" in name:
            loaded = self._import(name)
        else:
            entry_point = self._entry_points().get(name)
            if entry_point is None:
                return None
            loaded = entry_point.load()
        if isinstance(loaded, type) and issubclass(loaded, self.base):
            self._items.setdefault(name, loaded)  # type: ignore[arg-type]
        return self._items.get(name)

    def _import(self, name: str) -> Any:
        module_name, _, attribute = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # ImportError, or whatever the module raised while loading
            raise RegistryError(
                f"cannot import module {module_name!r}: {type(error).__name__}: {error}"
            ) from error
        loaded = getattr(module, attribute, None)
        if not (isinstance(loaded, type) and issubclass(loaded, self.base)):
            raise RegistryError(
                f"{module_name!r} has no {self.base.__name__} subclass named {attribute!r}"
            )
        return loaded

    def names(self) -> list[str]:
        return sorted(set(self._items) | set(self._entry_points()))

    def suggestion(self, name: str) -> str | None:
        matches = difflib.get_close_matches(name, self.names(), n=1, cutoff=0.6)
        return matches[0] if matches else None


calculators: Registry[type[Calculator]] = Registry(
    "calculator", CALCULATOR_ENTRY_POINTS, Calculator
)
input_stream_handlers: Registry[type[InputStreamHandler]] = Registry(
    "input stream handler", HANDLER_ENTRY_POINTS, InputStreamHandler
)
for _handler in BUILTIN_HANDLERS:
    input_stream_handlers.register(_handler.__name__, _handler)


@overload
def register_calculator(cls: C, /) -> C: ...
@overload
def register_calculator(*, name: str) -> Callable[[C], C]: ...
def register_calculator(cls: C | None = None, /, *, name: str | None = None) -> Any:
    """Class decorator: make a calculator available to graphs under its class name (or `name`)."""

    def register(klass: C) -> C:
        if not issubclass(klass, Calculator):
            raise TypeError(f"{klass!r} is not a Calculator subclass")
        calculators.register(name or klass.__name__, klass)
        return klass

    return register(cls) if cls is not None else register


@overload
def register_input_stream_handler(cls: H, /) -> H: ...
@overload
def register_input_stream_handler(*, name: str) -> Callable[[H], H]: ...
def register_input_stream_handler(cls: H | None = None, /, *, name: str | None = None) -> Any:
    """Class decorator: make an input stream handler available under its class name."""

    def register(klass: H) -> H:
        input_stream_handlers.register(name or klass.__name__, klass)
        return klass

    return register(cls) if cls is not None else register
