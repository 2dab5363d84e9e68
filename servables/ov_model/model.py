"""One version of a plain OpenVINO model: compiled once, served by a pool of infer requests.

`nireq` infer requests run concurrently (OVMS's `nireq`); a request borrows one from the pool
and runs it on one of the model's `nireq` threads (OpenVINO releases the GIL while it infers), so
inference never blocks the event loop and concurrent requests overlap on the device. Not
`start_async` with a completion callback: when an inference fails, OpenVINO's Python binding
throws inside its callback wrapper and never calls the Python function, so the caller would wait
forever and the infer request would never return to the pool. Inputs are checked against the model's
inputs (name, element type, shape) with messages that name the input; numpy arrays are handed to
OpenVINO without copying.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from servables.errors import InvalidRequest, ServableError, ServableLoadError
from servables.ov_model.datatypes import OPENVINO_TO_KSERVE, kserve_name

logger = logging.getLogger(__name__)

_core_lock = threading.Lock()
_core: Any = None


def core() -> Any:
    """The process's OpenVINO Core (plugins load once)."""
    global _core
    with _core_lock:
        if _core is None:
            import openvino

            _core = openvino.Core()
        return _core


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as KServe describes it; -1 marks a dimension of any size."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def accepts_shape(self, shape: Sequence[int]) -> bool:
        return len(shape) == len(self.shape) and all(
            want in (-1, got) for want, got in zip(self.shape, shape, strict=True)
        )


def _spec(port: Any) -> TensorSpec:
    partial = port.get_partial_shape()
    dims = tuple(-1 if dim.is_dynamic else dim.get_length() for dim in partial)
    element = port.get_element_type().get_type_name()
    return TensorSpec(port.get_any_name(), OPENVINO_TO_KSERVE.get(element, element), dims)


def find_model_file(directory: Path) -> Path:
    """The model in a version folder: one .xml (with its .bin) or one .onnx file."""
    candidates = sorted(directory.glob("*.xml")) or sorted(directory.glob("*.onnx"))
    if len(candidates) != 1:
        found = ", ".join(p.name for p in candidates) or "none"
        raise ServableLoadError(
            f"{directory} must hold exactly one model (.xml with its .bin, or .onnx); found {found}"
        )
    return candidates[0]


def _parse_shape(text: str) -> list[int]:
    """'(1,3,224,224)' or '[1, -1]' -> [1, 3, 224, 224]."""
    cleaned = text.strip().strip("()[]")
    try:
        return [int(part) for part in cleaned.split(",") if part.strip()]
    except ValueError as error:
        raise ServableLoadError(f"shape {text!r} is not a list of integers") from error


class OpenVINOModel:
    """See the module docstring."""

    def __init__(
        self,
        name: str,
        version: int,
        directory: Path,
        *,
        device: str = "CPU",
        properties: Mapping[str, Any] | None = None,
        nireq: int = 0,
        batch_size: str | None = None,
        shape: str | Mapping[str, str] | None = None,
        layout: str | Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.directory = directory
        self.device = device
        self.properties = dict(properties or {})
        self.nireq_setting = nireq
        self.batch_size = batch_size
        self.shape = shape
        self.layout = layout
        self.inputs: list[TensorSpec] = []
        self.outputs: list[TensorSpec] = []
        self.nireq = 0
        self._compiled: Any = None
        self._pool: asyncio.Queue[Any] | None = None
        self._threads: ThreadPoolExecutor | None = None

    def load(self) -> None:
        """Read, reshape and compile (blocking: call from a worker thread)."""
        path = find_model_file(self.directory)
        try:
            model = core().read_model(str(path))
            self._reshape(model)
            self._set_layout(model)
            compiled = core().compile_model(model, self.device, self.properties)
        except RuntimeError as error:
            raise ServableLoadError(f"{self.name} version {self.version}: {error}") from error
        self._compiled = compiled
        self.inputs = [_spec(port) for port in compiled.inputs]
        self.outputs = [_spec(port) for port in compiled.outputs]
        optimal = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        self.nireq = self.nireq_setting if self.nireq_setting > 0 else max(1, int(optimal))

    def _reshape(self, model: Any) -> None:
        if self.shape == "auto":
            model.reshape(
                {port.get_any_name(): [-1] * len(port.get_partial_shape()) for port in model.inputs}
            )
        elif isinstance(self.shape, str):
            model.reshape(_parse_shape(self.shape))
        elif isinstance(self.shape, Mapping):
            model.reshape({name: _parse_shape(value) for name, value in self.shape.items()})
        if self.batch_size not in (None, "", "0"):
            import openvino

            batch = -1 if self.batch_size == "auto" else int(str(self.batch_size))
            openvino.set_batch(model, batch)

    def _set_layout(self, model: Any) -> None:
        if not self.layout:
            return
        import openvino

        layouts = (
            self.layout
            if isinstance(self.layout, Mapping)
            else {port.get_any_name(): self.layout for port in model.inputs}
        )
        for port in model.inputs:
            if port.get_any_name() in layouts:
                port.get_node().set_layout(openvino.Layout(layouts[port.get_any_name()]))

    def start(self) -> None:
        """Create the infer-request pool (on the event loop that will serve requests)."""
        self._pool = asyncio.Queue()
        for _ in range(self.nireq):
            self._pool.put_nowait(self._compiled.create_infer_request())
        self._threads = ThreadPoolExecutor(self.nireq, thread_name_prefix=f"infer-{self.name}")

    def check_inputs(self, inputs: Mapping[str, np.ndarray[Any, Any]]) -> None:
        expected = {spec.name: spec for spec in self.inputs}
        for name in inputs:
            if name not in expected:
                raise InvalidRequest(
                    f"Unexpected input: {name}; {self.name} takes " + ", ".join(sorted(expected)),
                    param=name,
                )
        for name, spec in expected.items():
            if name not in inputs:
                raise InvalidRequest(f"Missing input: {name}", param=name)
            array = inputs[name]
            if kserve_name(array.dtype) != spec.datatype:
                raise InvalidRequest(
                    f"Invalid datatype of input {name}: got {kserve_name(array.dtype)}, "
                    f"expected {spec.datatype}",
                    param=name,
                )
            if not spec.accepts_shape(array.shape):
                raise InvalidRequest(
                    f"Invalid shape of input {name}: got {list(array.shape)}, expected "
                    f"{list(spec.shape)}",
                    param=name,
                )

    async def infer(
        self, inputs: Mapping[str, np.ndarray[Any, Any]], outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Run one inference; returns the requested outputs (all by default) as numpy arrays."""
        self.check_inputs(inputs)
        names = [spec.name for spec in self.outputs]
        wanted = list(outputs) if outputs else names
        for name in wanted:
            if name not in names:
                raise InvalidRequest(
                    f"Unexpected output: {name}; {self.name} produces " + ", ".join(names),
                    param=name,
                )
        pool, threads = self._pool, self._threads
        assert pool is not None and threads is not None, "start() was not called"
        request = await pool.get()
        job = asyncio.get_running_loop().run_in_executor(
            threads, _infer, request, dict(inputs), wanted
        )

        def release(finished: asyncio.Future[Any]) -> None:
            # Only once OpenVINO is done with the request, even if the caller was cancelled.
            pool.put_nowait(request)
            if not finished.cancelled():
                finished.exception()  # retrieved: a cancelled caller no longer wants it

        job.add_done_callback(release)
        try:
            return await asyncio.shield(job)
        except RuntimeError as error:
            logger.error("%s: inference failed: %s", self.name, error)
            raise ServableError(f"{self.name}: inference failed: {error}") from error


def _infer(request: Any, inputs: dict[str, Any], outputs: list[str]) -> dict[str, Any]:
    """On a model thread: run, and copy the outputs before the request can be reused."""
    request.infer(inputs, share_inputs=True)
    return {name: request.get_tensor(name).data.copy() for name in outputs}
