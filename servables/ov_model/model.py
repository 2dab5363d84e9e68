"""One version of a plain OpenVINO model: compiled once, served by a pool of infer requests.

`nireq` infer requests run concurrently (OVMS's `nireq`); a request borrows one from the pool
and runs it on one of the model's `nireq` threads (OpenVINO releases the GIL while it infers), so
inference never blocks the event loop for long and concurrent requests overlap on the device. Not
`start_async` with a completion callback: when an inference fails, OpenVINO's Python binding
throws inside its callback wrapper and never calls the Python function, so the caller would wait
forever and the infer request would never return to the pool.

Small models run on the event loop instead: handing an inference to a thread and waking the loop
when it is done costs ~0.1-0.3 ms of CPU and latency on these machines, more than a tiny model's
whole inference (benchmarks/kserve.py's MLP: ~0.03-0.15 ms). At load the model times a few
inferences on zeros (dynamic dimensions at 1; the first also warms the model up; CPU time, so a
busy machine does not make the model look slow); a request then
runs inline when that time, scaled by its input size, is below INLINE_MAX_SECONDS, and while the
inline runs themselves stay fast. Everything else goes to the threads, so the loop is never held
much longer than that. (Timing on the threads instead would not work: there the measured time
includes waiting for the GIL and for the other threads, which grows with the load.)

Inline runs are serial (one event loop), so when the server chose the threading layout itself (CPU,
no threading property in plugin_config) a small model gets a second compilation for them: one
stream of one thread, whose synchronous inference runs on the calling thread. With throughput
streams every synchronous inference is handed to a stream's thread and waited for; on the MLP
that costs ~75 us per inference against ~30 us on the caller's thread. The inline infer request
owns its input tensors and each request's inputs are copied into them (a few hundred bytes to a
few KiB: cheaper than wrapping and setting a new tensor, ~15 us, and read-only request bytes need
no extra copy). Requests that reach their inline inference in the same pass of the event loop run
back to back at the end of it (`pass_batch`), which keeps the model in the core's caches.

Inputs are checked against the model's inputs (name, element type, shape) with messages that name
the input. They reach OpenVINO as tensors set on the infer request, not through its Python input
dispatcher (which costs ~40-60 us per call): a writable C-contiguous array is shared without a
copy; a read-only one (a view of request bytes, which cannot be shared) is copied once; BYTES
become a string tensor. Outputs are copied once out of the infer request, which is reused.

With `dynamic_batching` in the model's config, checked calls go through a `DynamicBatcher`
(dynamic_batcher.py), which stacks concurrent calls along dimension 0 and runs each batch through
the same path a single call takes (inline or on the threads); the batch dimension is made dynamic
at load (`_make_batch_dynamic`).

With `count_inferences` (the server's /metrics), each call and inference is counted in `stats`
(inference_stats.py: OVMS's per-version metrics): the wait for an infer request, the time
OpenVINO takes, the calls and infer requests in use (~1.5 us per inference).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from servables import openvino_defaults
from servables.errors import InvalidRequest, ServableError, ServableLoadError
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.ov_model.datatypes import KSERVE_TO_NUMPY, OPENVINO_TO_KSERVE, kserve_name
from servables.ov_model.dynamic_batcher import BatchStats, DynamicBatcher
from servables.ov_model.images import ImageInput, decode_image_inputs
from servables.ov_model.inference_stats import InferenceStats
from servables.ov_model.model_files import find_model_file
from servables.ov_model.pass_batch import PassBatcher
from servables.ov_model.preprocessing import Preprocessing

logger = logging.getLogger(__name__)

# An inline inference: the inputs, the names of the outputs wanted, when it was asked for.
InlineJob = tuple[Mapping[str, np.ndarray[Any, Any]], list[str], float]

# A request whose estimated inference time is below this runs on the event loop (module docstring).
INLINE_MAX_SECONDS = 300e-6
# Timed inferences at load (after one warm-up); the fastest is the model's cost. Enough that a
# busy machine (runs delayed by other processes) still shows it; fewer when the answer is clear.
CALIBRATION_RUNS = 20
# Inlining stops for good when most of this many recent inline runs took over ten times the limit
# (the load-time timing misjudged the model). Wall time, so a busy machine stretches every run; the
# margin keeps that from counting, and single slow runs do not count either.
INLINE_WINDOW = 16
INLINE_SLOW_FACTOR = 10
# The inline compilation of a small model: one stream, one thread (module docstring), and no
# pinning: with it, the CPU plugin moves the calling thread (the event loop's) to core 0 before
# every inference and back after, two sched_setaffinity calls and often a migration.
INLINE_PROPERTIES = {
    "PERFORMANCE_HINT": "LATENCY",
    "INFERENCE_NUM_THREADS": 1,
    "ENABLE_CPU_PINNING": False,
}

_core_lock = threading.Lock()
_core: Any = None


def core() -> Any:
    """The process's OpenVINO Core (plugins load once), with the server's CPU extension."""
    global _core
    with _core_lock:
        if _core is None:
            import openvino

            created = openvino.Core()
            extension = openvino_defaults.current().cpu_extension
            if extension is not None:
                created.add_extension(extension)
            _core = created
        return _core


@dataclass(frozen=True)
class TensorSpec:
    """A model input or output as KServe describes it; -1 marks a dimension of any size."""

    name: str
    datatype: str
    shape: tuple[int, ...]

    def accepts_shape(self, shape: Sequence[int]) -> bool:
        if len(shape) != len(self.shape):
            return False
        for want, got in zip(self.shape, shape, strict=True):
            if want != got and want != -1:
                return False
        return True


def _spec(port: Any) -> TensorSpec:
    partial = port.get_partial_shape()
    dims = tuple(-1 if dim.is_dynamic else dim.get_length() for dim in partial)
    element = port.get_element_type().get_type_name()
    return TensorSpec(port.get_any_name(), OPENVINO_TO_KSERVE.get(element, element), dims)


# Properties that say how a CPU model uses threads; when plugin_config sets none of them the
# model is compiled with the THROUGHPUT hint (see `compile_properties`).
THREADING_PROPERTIES = frozenset(
    {
        "PERFORMANCE_HINT",
        "NUM_STREAMS",
        "INFERENCE_NUM_THREADS",
        "CPU_THROUGHPUT_STREAMS",
        "CPU_THREADS_NUM",
    }
)


def compile_properties(device: str, properties: Mapping[str, Any]) -> dict[str, Any]:
    """plugin_config, plus the THROUGHPUT hint on CPU when it says nothing about threading.

    OpenVINO's CPU default is the LATENCY hint: one stream whose inference is split over all
    cores. A server runs `nireq` requests at once, which is what throughput streams are for (OVMS
    documents CPU_THROUGHPUT_AUTO as its default for the same reason), and the latency layout
    costs far more CPU per request: after every inference its helper threads spin waiting for
    the next one. Measured on 2 cores with benchmarks/kserve.py's MLP and a request every
    millisecond: ~825 us of CPU per inference with LATENCY, ~225 us with THROUGHPUT, for the
    same ~0.15 ms latency; the server's CPU per gRPC request fell by about as much.
    """
    compiled = openvino_defaults.with_defaults(properties)
    if device.upper().startswith("CPU") and not THREADING_PROPERTIES & set(compiled):
        compiled["PERFORMANCE_HINT"] = "THROUGHPUT"
    return compiled


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
        preprocessing: Preprocessing | None = None,
        dynamic_batching: DynamicBatchingConfig | None = None,
        count_inferences: bool = False,
    ) -> None:
        self.name = name
        self.version = version
        self.directory = directory
        self.device = device
        self.properties = dict(properties or {})
        self.nireq_setting = nireq
        self.batch_size = batch_size
        self.shape = shape
        self.preprocessing = preprocessing or Preprocessing()
        self.dynamic_batching = dynamic_batching
        # Batches formed (read by /metrics); the batcher itself is made by start().
        self.batch_stats = BatchStats()
        # OVMS's per-version numbers (waits, inference times, requests in flight) when /metrics
        # wants them; without, an inference pays nothing for them.
        self.stats = InferenceStats() if count_inferences else None
        self.streams = 0
        self._dynamic: DynamicBatcher | None = None
        self.inputs: list[TensorSpec] = []
        self.outputs: list[TensorSpec] = []
        self.nireq = 0
        self._compiled: Any = None
        # The single-threaded compilation for inline runs of a small model (module docstring).
        self._inline_compiled: Any = None
        self._inline_slot: InlineSlot | None = None
        self._batcher: PassBatcher[InlineJob, dict[str, Any]] | None = None
        self._pool: asyncio.Queue[InferSlot] | None = None
        self._threads: ThreadPoolExecutor | None = None
        self._output_names: list[str] = []
        self._input_specs: dict[str, TensorSpec] = {}
        # Numeric inputs, with what they need of encoded images sent as BYTES (images.py).
        self._image_inputs: dict[str, ImageInput | None] = {}
        # One inference's time and input size at load; whether recent inline runs were slow.
        self._inline_seconds = float("inf")
        self._inline_bytes = 1
        self._slow_runs: deque[bool] = deque(maxlen=INLINE_WINDOW)
        self._slow_count = 0

    def load(self) -> None:
        """Read, preprocess, reshape and compile (blocking: call from a worker thread).

        Preprocessing comes first, as in OVMS: a shape or batch size applies to the inputs as
        clients send them (after a layout change).
        """
        path = find_model_file(self.directory)
        where = f"{self.name} version {self.version}"
        try:
            model = core().read_model(str(path))
            model = self.preprocessing.apply(model, where)
            self._reshape(model)
            if self.dynamic_batching is not None:
                self._make_batch_dynamic(model)
            self._image_inputs = _image_inputs(model)
            compiled = core().compile_model(
                model, self.device, compile_properties(self.device, self.properties)
            )
        except RuntimeError as error:
            raise ServableLoadError(f"{where}: {error}") from error
        self._compiled = compiled
        self.inputs = [_spec(port) for port in compiled.inputs]
        self.outputs = [_spec(port) for port in compiled.outputs]
        self._output_names = [spec.name for spec in self.outputs]
        self._input_specs = {spec.name: spec for spec in self.inputs}
        optimal = compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
        self.nireq = self.nireq_setting if self.nireq_setting > 0 else max(1, int(optimal))
        self._calibrate(compiled)
        if self._inline_seconds < INLINE_MAX_SECONDS and self._server_chose_threading():
            try:
                inline = core().compile_model(
                    model,
                    self.device,
                    {**openvino_defaults.with_defaults(self.properties), **INLINE_PROPERTIES},
                )
            except RuntimeError as error:
                logger.debug("%s: no single-threaded compilation (%s)", self.name, error)
            else:
                self._inline_compiled = inline
                self._calibrate(inline)

    def _server_chose_threading(self) -> bool:
        return self.device.upper() == "CPU" and not THREADING_PROPERTIES & set(self.properties)

    def _reshape(self, model: Any) -> None:
        if self.shape == "auto":
            model.reshape(
                {port.get_any_name(): [-1] * len(port.get_partial_shape()) for port in model.inputs}
            )
        elif isinstance(self.shape, str):
            model.reshape(_parse_shape(self.shape))
        elif isinstance(self.shape, Mapping):
            ranks = {port.get_any_name(): len(port.get_partial_shape()) for port in model.inputs}
            model.reshape(
                {
                    name: [-1] * ranks.get(name, 0) if value == "auto" else _parse_shape(value)
                    for name, value in self.shape.items()
                }
            )
        if self.batch_size not in (None, "", "0") and self.shape is None:
            import openvino

            batch = -1 if self.batch_size == "auto" else int(str(self.batch_size))
            openvino.set_batch(model, batch)

    def _make_batch_dynamic(self, model: Any) -> None:
        """Dynamic batching stacks calls along dimension 0, which must therefore take any size.

        A model file with a static batch (often 1) is reshaped to a dynamic one, as a user who
        switches batching on expects (OVMS's `batch_size: "auto"` reshapes too, per request);
        a batch the config itself pins (`batch_size` N, or `shape`) is the user's explicit
        choice, so that fails the load instead, as does a model OpenVINO cannot reshape.
        """
        where = f"{self.name} version {self.version}: dynamic_batching"
        static = {}
        for port in model.inputs:
            shape = port.get_partial_shape()
            name = port.get_any_name()
            if shape.rank.is_dynamic or len(shape) == 0:
                raise ServableLoadError(
                    f"{where} needs a batch dimension, and input {name} has "
                    + ("no known rank" if shape.rank.is_dynamic else "none (a scalar)")
                )
            if not shape[0].is_dynamic:
                static[name] = shape
        if static:
            pinned = self.batch_size not in (None, "", "0", "auto") or self.shape not in (
                None,
                "auto",
            )
            name, shape = next(iter(static.items()))
            if pinned:
                raise ServableLoadError(
                    f"{where} needs a dynamic batch dimension, but the config pins input {name} "
                    f'to {shape} (batch_size or shape); remove it, or use batch_size "auto"'
                )
            import openvino

            try:
                model.reshape(
                    {
                        port.get_any_name(): openvino.PartialShape(
                            [openvino.Dimension(-1), *list(port.get_partial_shape())[1:]]
                        )
                        for port in model.inputs
                    }
                )
            except RuntimeError as error:
                raise ServableLoadError(
                    f"{where}: input {name} has a static batch ({shape}) and the model cannot "
                    f"be reshaped to a dynamic one: {error}"
                ) from error
            logger.info("%s: batch dimension made dynamic for dynamic batching", self.name)
        for port in model.outputs:
            shape = port.get_partial_shape()
            if shape.rank.is_static and (len(shape) == 0 or not shape[0].is_dynamic):
                raise ServableLoadError(
                    f"{where}: output {port.get_any_name()} of shape {shape} has no dynamic "
                    "batch dimension to split the results along"
                )

    def start(self) -> None:
        """Create the infer-request pool (on the event loop that will serve requests)."""
        self._pool = asyncio.Queue()
        names = self._output_names
        for _ in range(self.nireq):
            self._pool.put_nowait(InferSlot(self._compiled.create_infer_request(), names))
        self._threads = ThreadPoolExecutor(self.nireq, thread_name_prefix=f"infer-{self.name}")
        self.streams = self._streams()
        if self._inline_compiled is not None:
            self._inline_slot = InlineSlot(self._inline_compiled.create_infer_request(), names)
            self._batcher = PassBatcher(self._infer_own)
        if self.dynamic_batching is not None:
            self.dynamic_batching = self.dynamic_batching.with_concurrency(
                self._streams(), self.nireq
            )
            self._dynamic = DynamicBatcher(
                f"{self.name} version {self.version}",
                self.dynamic_batching,
                self._infer_checked,
                names,
                self.batch_stats,
            )

    def _streams(self) -> int:
        """The compiled model's streams (1 if the device does not say)."""
        try:
            return max(1, int(self._compiled.get_property("NUM_STREAMS")))
        except (RuntimeError, TypeError, ValueError):
            return 1

    def check_inputs(self, inputs: Mapping[str, np.ndarray[Any, Any]]) -> None:
        expected = self._input_specs
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

    def _calibrate(self, compiled: Any) -> None:
        """Time inferences on zeros (see the module docstring); no inlining if they fail."""
        import openvino

        try:
            inputs = {}
            for port in compiled.inputs:
                dims = port.get_partial_shape()
                shape = [1 if dim.is_dynamic else dim.get_length() for dim in dims]
                inputs[port.get_any_name()] = openvino.Tensor(port.get_element_type(), shape)
            request = compiled.create_infer_request()
            times = []
            for _ in range(CALIBRATION_RUNS + 1):
                # CPU time of the process, not wall time: on a busy machine the runs wait for a
                # core, which says nothing about the model; the fastest run is the model's cost.
                started = time.process_time()
                request.infer(inputs)
                times.append(time.process_time() - started)
                if len(times) > 1:
                    fastest = min(times[1:])
                    if fastest > 10 * INLINE_MAX_SECONDS:
                        return  # not a small model: no need for more runs
                    if fastest < INLINE_MAX_SECONDS / 2 and len(times) > 3:
                        break  # clearly small
        except (RuntimeError, TypeError, ValueError) as error:
            logger.debug("%s: no timing at load (%s); inferences run on threads", self.name, error)
            return
        self._inline_seconds = min(times[1:])
        self._inline_bytes = max(1, sum(tensor.byte_size for tensor in inputs.values()))
        logger.debug(
            "%s: %.0f us per inference at load; inline up to %.0f us",
            self.name,
            self._inline_seconds * 1e6,
            INLINE_MAX_SECONDS * 1e6,
        )

    def _run_inline(self, input_bytes: int) -> bool:
        """Whether this request's inference is cheap enough to run on the event loop."""
        estimate = self._inline_seconds * max(1.0, input_bytes / self._inline_bytes)
        return estimate < INLINE_MAX_SECONDS

    def _inline_ran(self, seconds: float) -> None:
        slow = seconds > INLINE_SLOW_FACTOR * INLINE_MAX_SECONDS
        runs = self._slow_runs
        if len(runs) == INLINE_WINDOW:
            self._slow_count -= runs[0]
        runs.append(slow)
        self._slow_count += slow
        if self._slow_count > INLINE_WINDOW // 2:
            self._inline_seconds = float("inf")
            logger.info(
                "%s: inline inferences take over %.0f us; running them on threads from now on",
                self.name,
                INLINE_SLOW_FACTOR * INLINE_MAX_SECONDS * 1e6,
            )

    async def infer(
        self, inputs: Mapping[str, np.ndarray[Any, Any]], outputs: Sequence[str] | None = None
    ) -> dict[str, np.ndarray[Any, Any]]:
        """Run one inference; returns the requested outputs (all by default) as numpy arrays."""
        stats = self.stats
        if stats is not None:
            stats.current_requests += 1
        try:
            inputs = decode_image_inputs(inputs, self._image_inputs)
            self.check_inputs(inputs)
            names = self._output_names
            wanted = names
            if outputs:
                wanted = list(outputs)
                for name in wanted:
                    if name not in names:
                        raise InvalidRequest(
                            f"Unexpected output: {name}; {self.name} produces " + ", ".join(names),
                            param=name,
                        )
            if self._dynamic is not None:
                return await self._dynamic.submit(inputs, wanted)
            return await self._infer_checked(inputs, wanted)
        finally:
            if stats is not None:
                stats.current_requests -= 1

    async def _infer_checked(
        self, inputs: Mapping[str, np.ndarray[Any, Any]], wanted: list[str]
    ) -> dict[str, np.ndarray[Any, Any]]:
        """One inference of inputs already checked (one call's, or a stacked batch's)."""
        pool, threads = self._pool, self._threads
        assert pool is not None and threads is not None, "start() was not called"
        stats = self.stats
        entered = time.perf_counter() if stats is not None else 0.0
        input_bytes = sum(array.nbytes for array in inputs.values())
        inline = self._run_inline(input_bytes)
        own, batcher = self._inline_slot, self._batcher
        if inline and own is not None and batcher is not None and not own.lock.locked():
            return await batcher.submit((inputs, wanted, entered))
        slot = await pool.get()
        if stats is not None:
            stats.waited(time.perf_counter() - entered)
            stats.active += 1
        if inline:
            try:
                return self._infer_inline(slot, _infer, inputs, wanted)
            finally:
                pool.put_nowait(slot)
                if stats is not None:
                    stats.active -= 1
        job = asyncio.get_running_loop().run_in_executor(
            threads, _infer if stats is None else _infer_timed, slot, dict(inputs), wanted
        )

        def release(finished: asyncio.Future[Any]) -> None:
            # Only once OpenVINO is done with the request, even if the caller was cancelled.
            pool.put_nowait(slot)
            if stats is not None:
                stats.active -= 1
                stats.inferred(slot.seconds)
            if not finished.cancelled():
                finished.exception()  # retrieved: a cancelled caller no longer wants it

        job.add_done_callback(release)
        try:
            return await asyncio.shield(job)
        except RuntimeError as error:
            logger.error("%s: inference failed: %s", self.name, error)
            raise ServableError(f"{self.name}: inference failed: {error}") from error

    def _infer_own(self, job: InlineJob) -> dict[str, Any]:
        """One inference on the inline compilation's own request (see pass_batch)."""
        own = self._inline_slot
        assert own is not None
        inputs, wanted, entered = job
        stats = self.stats
        if stats is not None:
            stats.waited(time.perf_counter() - entered)
            stats.active += 1
        try:
            with own.lock:
                return self._infer_inline(own, _infer_copying, inputs, wanted)
        finally:
            if stats is not None:
                stats.active -= 1

    def _infer_inline(
        self,
        slot: InferSlot,
        run: Callable[[InferSlot, Mapping[str, Any], list[str]], dict[str, Any]],
        inputs: Mapping[str, Any],
        wanted: list[str],
    ) -> dict[str, Any]:
        try:
            started = time.perf_counter()
            results = run(slot, inputs, wanted)
            seconds = time.perf_counter() - started
            self._inline_ran(seconds)
            if self.stats is not None:
                self.stats.inferred(seconds)
            return results
        except RuntimeError as error:
            logger.error("%s: inference failed: %s", self.name, error)
            raise ServableError(f"{self.name}: inference failed: {error}") from error


def _image_inputs(model: Any) -> dict[str, ImageInput | None]:
    """Every numeric input of the model as it will be compiled, with what images it takes."""
    found = {}
    for port in model.inputs:
        # Not ov.Type.to_dtype(): two versions loading at once on two threads hung in it.
        datatype = OPENVINO_TO_KSERVE.get(port.get_element_type().get_type_name())
        dtype = KSERVE_TO_NUMPY.get(datatype or "")
        if dtype is not None and datatype != "BYTES":
            found[port.get_any_name()] = ImageInput.of(port, dtype)
    return found


class InferSlot:
    """An infer request, the input tensors set on it, and its outputs' names in the order
    OpenVINO returns them.

    The request keeps only OpenVINO's side of a tensor set with `set_tensor`; the Python tensor
    owns the reference to the numpy memory it shares. So each stays here until the next request
    on this slot replaces it, or the memory would be freed under the request.
    """

    __slots__ = ("inputs", "outputs", "request", "seconds")

    def __init__(self, request: Any, outputs: list[str]) -> None:
        self.request = request
        self.outputs = outputs
        self.inputs: dict[str, Any] = {}
        self.seconds = 0.0  # the last inference's time on a thread (read when it is released)


class InlineSlot(InferSlot):
    """The inline infer request: it owns its input tensors (`arrays`: their memory, which each
    request's inputs are copied into), and a lock in case two threads ever call one model."""

    __slots__ = ("arrays", "lock")

    def __init__(self, request: Any, outputs: list[str]) -> None:
        super().__init__(request, outputs)
        self.arrays: dict[str, np.ndarray[Any, Any]] = {}
        self.lock = threading.Lock()


def _input_tensor(array: np.ndarray[Any, Any]) -> Any:
    """An ov.Tensor for an input: the array's own memory when OpenVINO may share it (writable
    and C-contiguous), else a copy in memory the tensor owns."""
    import openvino

    if not (array.flags.writeable and array.flags.c_contiguous):
        array = np.array(array, order="C")  # the one copy (ov.Tensor refuses read-only arrays)
    return openvino.Tensor(array, shared_memory=True)


def _string_tensor(array: np.ndarray[Any, Any]) -> Any:
    """An ov.Tensor of strings for a BYTES input: an object array of `bytes` (what KServe
    requests hold), which OpenVINO's Python API takes neither as a tensor nor through its input
    dispatcher ('Unsupported data type: object'), or a numpy string array. Each element is set as
    it is, embedded and trailing NULs included."""
    import openvino

    tensor = openvino.Tensor(openvino.Type.string, list(array.shape))
    tensor.bytes_data = [
        item if isinstance(item, bytes) else str(item).encode() for item in array.ravel()
    ]
    return tensor


def _results(slot: InferSlot, results: Any, wanted: list[str]) -> dict[str, Any]:
    """The wanted outputs of `InferRequest.infer`: its copies (writable, owned by the caller, who
    may pass them on), taken by position, not through the request's tensors again (~3 us)."""
    values = results.to_tuple()
    names = slot.outputs
    if wanted == names:
        return dict(zip(names, values, strict=True))
    return {name: values[names.index(name)] for name in wanted}


def _infer(slot: InferSlot, inputs: Mapping[str, Any], outputs: list[str]) -> dict[str, Any]:
    """Run, and copy the outputs before the request can be reused."""
    request = slot.request
    for name, array in inputs.items():
        tensor = _string_tensor(array) if array.dtype.kind in "OSU" else _input_tensor(array)
        request.set_tensor(name, tensor)
        slot.inputs[name] = tensor  # after set_tensor: the old one is no longer used
    return _results(slot, request.infer(), outputs)


def _infer_timed(slot: InferSlot, inputs: Mapping[str, Any], outputs: list[str]) -> dict[str, Any]:
    """`_infer` on a pool thread, its time left on the slot for the event loop to count."""
    started = time.perf_counter()
    try:
        return _infer(slot, inputs, outputs)
    finally:
        slot.seconds = time.perf_counter() - started


def _infer_copying(
    slot: InferSlot, inputs: Mapping[str, Any], outputs: list[str]
) -> dict[str, Any]:
    """`_infer` for the inline slot: inputs are copied into tensors the slot owns, a new one set
    only when an input's shape or type changes."""
    import openvino

    assert isinstance(slot, InlineSlot)
    request = slot.request
    for name, array in inputs.items():
        if array.dtype.kind in "OSU":
            tensor = _string_tensor(array)  # owns its strings: nothing to keep in `arrays`
            request.set_tensor(name, tensor)
            slot.inputs[name] = tensor
            continue
        own = slot.arrays.get(name)
        if own is None or own.shape != array.shape or own.dtype != array.dtype:
            own = np.empty(array.shape, array.dtype.newbyteorder("="))
            tensor = openvino.Tensor(own, shared_memory=True)
            request.set_tensor(name, tensor)
            slot.inputs[name] = tensor
            slot.arrays[name] = own
        np.copyto(own, array)
    return _results(slot, request.infer(), outputs)
