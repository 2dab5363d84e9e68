"""A Python node's handler script: OVMS's `OvmsPythonModel` class, loaded once per node.

The script at `handler_path` defines `class OvmsPythonModel` with `execute(inputs)` (required),
`initialize(kwargs)` and `finalize()` (optional). Loading a graph runs the script as a module of
its own (two nodes with scripts of the same file name in different folders each get theirs) with
the script's folder on sys.path (so it can import modules beside it), makes one instance for the
node and calls `initialize`; unloading the graph calls `finalize`. Anything that goes wrong in the
user's code is reported with the script's path and the traceback of its own frames: at load, in
the servable's status; in `execute`, to the request that ran it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import logging
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from servables.errors import ServableError, ServableLoadError

logger = logging.getLogger(__name__)

CLASS_NAME = "OvmsPythonModel"
# What `next_outputs` returns once a generator has no more outputs.
EXHAUSTED: Any = object()
T = TypeVar("T")
_module_numbers = itertools.count()
_path_lock = threading.Lock()


class PythonNodeError(ServableError):
    """The user's `execute` (or its generator) raised, or returned something unusable (500)."""


@dataclass(frozen=True)
class HandlerConfig:
    """One node's script and what `initialize` is told about the node."""

    node_name: str
    handler_path: Path  # absolute
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)

    def initialize_kwargs(self) -> dict[str, Any]:
        return {
            "node_name": self.node_name,
            "input_names": list(self.input_names),
            "output_names": list(self.output_names),
            "base_path": str(self.handler_path.parent),
        }


def _own_frame(filename: str) -> bool:
    """Frames of the loader and of importlib, which tell the user nothing."""
    return filename == __file__ or filename.startswith("<frozen importlib")


def user_traceback(error: BaseException) -> str:
    """The traceback of `error` without the loader's frames (the script's, and what it called)."""
    summary = traceback.TracebackException.from_exception(error)
    summary.stack = traceback.StackSummary.from_list(
        [frame for frame in summary.stack if not _own_frame(frame.filename)]
    )
    return "".join(summary.format()).rstrip()


def _where(error: BaseException) -> str:
    """' (model.py, line 12, in execute)': where in user code `error` was raised."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _own_frame(f.filename)]
    if not frames:
        return ""
    last = frames[-1]
    return f" ({Path(last.filename).name}, line {last.lineno}, in {last.name})"


class PythonHandler:
    """One node's `OvmsPythonModel` instance; a graph resource (`start` loads, `stop` finalizes).

    Shared by every run of the graph, as in OVMS: what `initialize` stores on `self` is seen by
    all requests.
    """

    def __init__(self, config: HandlerConfig) -> None:
        self.config = config
        self.model: Any = None
        self._module_name: str | None = None

    @property
    def label(self) -> str:
        return f'Python node "{self.config.node_name}" ({self.config.handler_path})'

    async def start(self) -> None:
        await asyncio.to_thread(self._load)

    def _load(self) -> None:
        path = self.config.handler_path
        if not path.is_file():
            raise ServableLoadError(
                f"{self.label}: handler_path does not exist", param="handler_path"
            )
        logger.info("loading %s", self.label)
        try:
            module = self._import(path)
            model_class = getattr(module, CLASS_NAME, None)
            if not isinstance(model_class, type):
                raise ServableLoadError(f"{self.label}: the script defines no class {CLASS_NAME}")
            if not callable(getattr(model_class, "execute", None)):
                raise ServableLoadError(
                    f"{self.label}: {CLASS_NAME} does not implement execute(self, inputs)"
                )
            model = model_class()
            initialize = getattr(model, "initialize", None)
            if callable(initialize):
                initialize(self.config.initialize_kwargs())
        except ServableLoadError:
            self._forget_module()
            raise
        except (Exception, SystemExit) as error:  # the user's code: what it raises fails the load
            self._forget_module()
            raise ServableLoadError(
                f"{self.label} failed to load:\n{user_traceback(error)}"
            ) from error
        self.model = model

    def _import(self, path: Path) -> ModuleType:
        """Run the script as a new module (a unique name: a reload runs the new text)."""
        folder = str(path.parent)
        with _path_lock:
            if folder not in sys.path:
                sys.path.append(folder)  # OVMS's rule: modules beside the script import
        name = f"_graphrt_handler_{next(_module_numbers)}_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ServableLoadError(f"{self.label}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses and pickle look classes up there
        self._module_name = name
        spec.loader.exec_module(module)
        return module

    def _forget_module(self) -> None:
        if self._module_name is not None:
            sys.modules.pop(self._module_name, None)
            self._module_name = None

    async def stop(self) -> None:
        model, self.model = self.model, None
        if model is not None and callable(getattr(model, "finalize", None)):
            try:
                await asyncio.to_thread(model.finalize)
            except Exception:
                logger.error("%s: finalize raised", self.label, exc_info=True)
        self._forget_module()

    def call(self, what: str, function: Callable[..., T], *args: Any) -> T:
        """Run user code; what it raises becomes a PythonNodeError naming node, script and line
        (the whole traceback goes to the log)."""
        try:
            return function(*args)
        except Exception as error:
            logger.warning("%s: %s raised\n%s", self.label, what, user_traceback(error))
            raise PythonNodeError(
                f"{self.label}: {what} raised {type(error).__name__}: {error}{_where(error)}"
            ) from error

    def execute(self, inputs: list[Any]) -> Any:
        if self.model is None:
            raise ServableError(f"{self.label} is not loaded")
        return self.call("execute", self.model.execute, inputs)

    def next_outputs(self, generator: Iterator[Any]) -> Any:
        """The generator's next set of outputs, or EXHAUSTED."""
        return self.call("execute's generator", next, generator, EXHAUSTED)
