"""Plain OpenVINO models: version policies, version folders, the infer-request pool, input checks.

The models are real: tiny IR files written here with openvino's Python API.
"""

from __future__ import annotations

import asyncio
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servables.errors import (
    InvalidRequest,
    ModelNotFound,
    ServableError,
    ServableNotReady,
)
from servables.ov_model import model as model_module
from servables.ov_model import pass_batch, versions
from servables.ov_model.model import OpenVINOModel, compile_properties
from servables.ov_model.versions import (
    ModelConfig,
    VersionedModel,
    VersionPolicy,
    VersionState,
)


def save_scale_model(directory: Path, factor: float, shape: list[int] | None = None) -> None:
    """y = x * factor, x FP32 of `shape` (default [-1, 3])."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter(shape or [-1, 3], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    y = ops.multiply(x, ops.constant(np.float32(factor)))
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y)], [x], "scale"), directory / "model.xml")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (None, [7]),
        ({"latest": {"num_versions": 2}}, [3, 7]),
        ({"all": {}}, [1, 3, 7]),
        ({"specific": {"versions": [1, 5]}}, [1]),
    ],
)
def test_version_policies(policy: Any, expected: list[int]) -> None:
    assert VersionPolicy.from_json(policy).select([3, 1, 7]) == expected


def config(base: Path, **settings: Any) -> ModelConfig:
    return ModelConfig.from_json(
        {"config": {"name": "scale", "base_path": str(base), **settings}}, base.parent, "m"
    )


async def test_versions_load_serve_and_unload(tmp_path: Path) -> None:
    for version, factor in ((1, 2.0), (2, 3.0)):
        (tmp_path / str(version)).mkdir()
        save_scale_model(tmp_path / str(version), factor)
    (tmp_path / "notes").mkdir()  # not a version
    model = VersionedModel(config(tmp_path, model_version_policy={"all": {}}))
    assert await model.refresh()
    assert model.available_versions() == [1, 2]
    x = np.ones((1, 3), np.float32)
    assert (await model.get().infer({"x": x}))["y"].tolist() == [[3.0, 3.0, 3.0]]
    assert (await model.get(1).infer({"x": x}))["y"].tolist() == [[2.0, 2.0, 2.0]]
    with pytest.raises(ModelNotFound, match="version 9 is not found"):
        model.get(9)

    shutil.rmtree(tmp_path / "2")
    assert await model.refresh()
    assert model.versions[2].state is VersionState.END
    assert model.get().version == 1
    assert not await model.refresh()  # nothing changed


async def test_a_version_that_fails_to_load_is_reported(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.xml").write_text("<not a model/>")
    model = VersionedModel(config(tmp_path))
    await model.refresh()
    assert model.versions[1].state is VersionState.UNAVAILABLE
    assert model.versions[1].error
    with pytest.raises(ServableNotReady, match="version 1 is UNAVAILABLE"):
        model.get(1)
    with pytest.raises(ServableNotReady, match="has no version available"):
        model.get()


async def test_a_new_latest_version_replaces_the_old_only_once_it_works(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    save_scale_model(tmp_path / "1", 2.0)
    model = VersionedModel(config(tmp_path))  # latest 1
    await model.refresh()
    assert model.get().version == 1

    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "model.xml").write_text("<not a model/>")
    await model.refresh()
    assert model.versions[2].state is VersionState.UNAVAILABLE
    assert model.get().version == 1  # still served: its replacement failed

    (tmp_path / "3").mkdir()
    save_scale_model(tmp_path / "3", 5.0)
    await model.refresh()
    assert model.get().version == 3
    assert model.versions[1].state is VersionState.END
    x = np.ones((1, 3), np.float32)
    assert (await model.get().infer({"x": x}))["y"].tolist() == [[5.0, 5.0, 5.0]]


def loaded(directory: Path, **options: Any) -> OpenVINOModel:
    model = OpenVINOModel("scale", 1, directory, **options)
    model.load()
    model.start()
    return model


async def test_requests_beyond_nireq_wait_for_a_free_infer_request(tmp_path: Path) -> None:
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path, nireq=2)
    assert model.nireq == 2
    inputs = [np.full((4, 3), i, np.float32) for i in range(40)]
    results = await asyncio.gather(*(model.infer({"x": x}) for x in inputs))
    for x, result in zip(inputs, results, strict=True):
        np.testing.assert_array_equal(result["y"], x * 2)


async def test_input_checks_name_the_input(tmp_path: Path) -> None:
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    cases: list[tuple[dict[str, np.ndarray[Any, Any]], str]] = [
        ({"x": np.ones((1, 3), np.int32)}, "Invalid datatype of input x: got INT32, expected FP32"),
        (
            {"x": np.ones((1, 4), np.float32)},
            "Invalid shape of input x: got [1, 4], expected [-1, 3]",
        ),
        ({}, "Missing input: x"),
        ({"x": np.ones((1, 3), np.float32), "z": np.ones(1)}, "Unexpected input: z"),
    ]
    for inputs, message in cases:
        with pytest.raises(InvalidRequest) as caught:
            await model.infer(inputs)
        assert caught.value.message.startswith(message)
    with pytest.raises(InvalidRequest, match="Unexpected output: q"):
        await model.infer({"x": np.ones((1, 3), np.float32)}, ["q"])


async def test_shape_setting_reshapes_the_model(tmp_path: Path) -> None:
    save_scale_model(tmp_path, 2.0, shape=[1, 3])
    fixed = loaded(tmp_path)
    assert fixed.inputs[0].shape == (1, 3)
    dynamic = loaded(tmp_path, shape="auto")
    assert dynamic.inputs[0].shape == (-1, -1)
    result = await dynamic.infer({"x": np.ones((2, 5), np.float32)})
    assert result["y"].shape == (2, 5)
    explicit = loaded(tmp_path, shape={"x": "(4,3)"})
    assert explicit.inputs[0].shape == (4, 3)


async def test_an_inference_that_fails_is_an_error_and_frees_its_infer_request(
    tmp_path: Path,
) -> None:
    """x [-1] reshaped to [2, -1]: an odd length passes the input checks and fails in OpenVINO."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([-1], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    y = ops.reshape(x, ops.constant(np.array([2, -1], np.int64)), special_zero=False)
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y)], [x], "pairs"), tmp_path / "model.xml")
    model = loaded(tmp_path, nireq=1)

    for _ in range(3):  # more failures than infer requests: each one came back to the pool
        with pytest.raises(ServableError, match="inference failed") as caught:
            await asyncio.wait_for(model.infer({"x": np.ones(3, np.float32)}), 10)
        assert not isinstance(
            caught.value, InvalidRequest
        )  # the server's failure, not the client's
    result = await asyncio.wait_for(model.infer({"x": np.arange(4, dtype=np.float32)}), 10)
    assert result["y"].tolist() == [[0.0, 1.0], [2.0, 3.0]]


async def test_a_failed_version_is_retried_with_backoff_while_the_old_one_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]
    monkeypatch.setattr(versions, "clock", lambda: now[0])
    (tmp_path / "1").mkdir()
    save_scale_model(tmp_path / "1", 2.0)
    model = VersionedModel(config(tmp_path))  # latest 1
    await model.refresh()
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "model.xml").write_text("<not a model/>")  # still being copied, say

    await model.refresh()
    failed = model.versions[2]
    assert (failed.state, failed.failures, failed.retry_at) == (VersionState.UNAVAILABLE, 1, 1001)
    assert model.get().version == 1
    assert not await model.refresh()  # too early: not tried again
    now[0] = 1001.0
    await model.refresh()  # tried again, fails again: the wait doubles
    assert (model.versions[2].failures, model.versions[2].retry_at) == (2, 1003)
    assert model.get().version == 1

    save_scale_model(tmp_path / "2", 7.0)  # the files are complete now
    now[0] = 1003.0
    assert await model.refresh()
    assert model.get().version == 2
    assert model.versions[1].state is VersionState.END
    x = np.ones((1, 3), np.float32)
    assert (await model.get().infer({"x": x}))["y"].tolist() == [[7.0, 7.0, 7.0]]


def test_cpu_models_get_the_throughput_hint_unless_plugin_config_says_how() -> None:
    assert compile_properties("CPU", {}) == {"PERFORMANCE_HINT": "THROUGHPUT"}
    assert compile_properties("CPU", {"NUM_STREAMS": 1}) == {"NUM_STREAMS": 1}
    assert compile_properties("CPU", {"PERFORMANCE_HINT": "LATENCY"}) == {
        "PERFORMANCE_HINT": "LATENCY"
    }
    assert compile_properties("GPU", {}) == {}


class RefusingExecutor(ThreadPoolExecutor):
    """Records that a job was handed to a thread."""

    def __init__(self) -> None:
        super().__init__(1)
        self.jobs = 0

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


async def test_a_tiny_model_runs_on_the_event_loop_and_a_big_request_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A limit no machine's timing of this model can miss, however busy (the timing at load is the
    # process's CPU time, which other threads of a loaded test process add to): the decision, not
    # this machine's speed, is under test. A 200,000-row input is still estimated far above it.
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.05)
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    executor = RefusingExecutor()
    model._threads = executor
    x = np.ones((1, 3), np.float32)
    assert (await model.infer({"x": x}))["y"].tolist() == [[2.0, 2.0, 2.0]]
    assert executor.jobs == 0  # timed at load as below INLINE_MAX_SECONDS: inline
    # An input many times larger than the one timed at load is estimated as slow: threads.
    big = np.ones((200_000, 3), np.float32)
    assert (await model.infer({"x": big}))["y"].shape == (200_000, 3)
    assert executor.jobs == 1


async def test_a_model_slower_than_the_inline_limit_runs_on_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    executor = RefusingExecutor()
    model._threads = executor
    await model.infer({"x": np.ones((1, 3), np.float32)})
    assert executor.jobs == 1


async def test_inline_inferences_that_turn_out_slow_move_to_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above, a limit no busy machine's timing at load misses (a run of 1 s is still over ten
    # times it): what is under test is the window of runs, not this machine's speed.
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.05)
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    assert model._run_inline(12)
    for _ in range(model_module.INLINE_WINDOW // 2):
        model._inline_ran(1.0)
    assert model._run_inline(12)  # half the window slow: could be a busy machine
    model._inline_ran(1.0)
    assert not model._run_inline(12)


async def test_inputs_are_shared_with_openvino_and_outputs_copied_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)  # the threads' infer requests
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path, nireq=1)
    writable = np.ones((2, 3), np.float32)
    result = (await model.infer({"x": writable}))["y"]
    assert result.tolist() == [[2.0] * 3] * 2
    result[0, 0] = 5.0  # the caller's own copy: the infer request's output is not touched
    assert model._pool is not None
    slot = model._pool.get_nowait()
    assert slot.request.get_tensor("y").data[0, 0] == 2.0
    model._pool.put_nowait(slot)
    assert model._pool is not None
    slot = model._pool.get_nowait()
    assert np.shares_memory(slot.request.get_tensor("x").data, writable)  # no copy on the way in
    model._pool.put_nowait(slot)
    # A read-only view (of request bytes) cannot be shared: it is copied, and still right.
    read_only = np.frombuffer(np.full((2, 3), 3.0, np.float32).tobytes(), np.float32)
    result = (await model.infer({"x": read_only.reshape(2, 3)}))["y"]
    assert result.tolist() == [[6.0] * 3] * 2


async def test_a_small_model_runs_inline_on_a_single_threaded_compilation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A generous limit, so that a busy machine's timings never send the larger inputs below to
    # the threads (which inputs go inline is test_a_tiny_model_runs_on_the_event_loop's subject).
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 1.0)
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    assert model._inline_compiled is not None
    assert int(model._inline_compiled.get_property("INFERENCE_NUM_THREADS")) == 1
    assert not model._inline_compiled.get_property("ENABLE_CPU_PINNING")  # the loop stays put
    own = model._inline_slot
    assert own is not None
    executor = RefusingExecutor()
    model._threads = executor

    caller = np.ones((2, 3), np.float32)
    result = (await model.infer({"x": caller}))["y"]
    assert result.tolist() == [[2.0] * 3] * 2
    # Copied into the slot's own tensor: the caller's array is never aliased by OpenVINO.
    assert not np.shares_memory(own.request.get_tensor("x").data, caller)
    caller[:] = 9.0
    result[:] = 0.0  # and the result is the caller's own copy
    assert own.request.get_tensor("y").data.tolist() == [[2.0] * 3] * 2
    # Read-only request bytes, then a new shape: each answered right on the same slot.
    read_only = np.frombuffer(np.full((2, 3), 3.0, np.float32).tobytes(), np.float32)
    assert (await model.infer({"x": read_only.reshape(2, 3)}))["y"].tolist() == [[6.0] * 3] * 2
    bigger = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal((await model.infer({"x": bigger}))["y"], bigger * 2)
    assert executor.jobs == 0
    # Should another thread hold the inline slot, a request takes a pooled infer request instead.
    with own.lock:
        np.testing.assert_array_equal((await model.infer({"x": bigger}))["y"], bigger * 2)
    assert executor.jobs == 0


async def test_plugin_config_threading_is_kept_for_inline_runs(tmp_path: Path) -> None:
    """A user who set how the model uses threads gets exactly that: no second compilation."""
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path, properties={"NUM_STREAMS": 2})
    assert model._inline_compiled is None and model._inline_slot is None
    executor = RefusingExecutor()
    model._threads = executor
    assert (await model.infer({"x": np.ones((1, 3), np.float32)}))["y"].tolist() == [[2.0] * 3]
    assert executor.jobs == 0  # still inline, on a pooled infer request


async def test_concurrent_inline_requests_run_in_one_pass_with_their_own_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 1.0)
    save_scale_model(tmp_path, 2.0)
    model = loaded(tmp_path)
    batcher = model._batcher
    assert batcher is not None
    batcher.mean_size = pass_batch.QUEUE_ABOVE  # as after batches with company
    executor = RefusingExecutor()
    model._threads = executor
    inputs = [np.full((1, 3), float(index), np.float32) for index in range(6)]
    results = await asyncio.gather(*(model.infer({"x": x}) for x in inputs))
    assert [r["y"].tolist() for r in results] == [[[2.0 * index] * 3] for index in range(6)]
    assert executor.jobs == 0
    assert batcher.mean_size > pass_batch.QUEUE_ABOVE  # they ran as one batch of six


def save_two_output_model(directory: Path) -> None:
    """y = 2x and z = x + 1, x FP32 [-1, 3]."""
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([-1, 3], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    y = ops.multiply(x, ops.constant(np.float32(2.0)))
    y.output(0).get_tensor().set_names({"y"})
    z = ops.add(x, ops.constant(np.float32(1.0)))
    z.output(0).get_tensor().set_names({"z"})
    ov.save_model(ov.Model([ops.result(y), ops.result(z)], [x], "two"), directory / "model.xml")


@pytest.mark.parametrize("inline_limit", [1.0, 0.0], ids=["inline", "threads"])
async def test_requested_outputs_come_by_name_in_the_order_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline_limit: float
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", inline_limit)
    save_two_output_model(tmp_path)
    model = loaded(tmp_path)
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    both = await model.infer({"x": x})
    assert list(both) == ["y", "z"]
    assert both["y"].tolist() == [[2.0, 4.0, 6.0]] and both["z"].tolist() == [[2.0, 3.0, 4.0]]
    assert (await model.infer({"x": x}, ["z"]))["z"].tolist() == [[2.0, 3.0, 4.0]]
    reordered = await model.infer({"x": x}, ["z", "y"])
    assert list(reordered) == ["z", "y"] and reordered["y"].tolist() == [[2.0, 4.0, 6.0]]


@pytest.mark.parametrize("inline_limit", [1.0, 0.0], ids=["inline", "threads"])
async def test_bytes_reach_a_string_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, classic_models: Any, inline_limit: float
) -> None:
    """KServe's BYTES arrive as an object array of bytes, which OpenVINO's input dispatcher
    refuses ('Unsupported data type: object'); they reach the string input as its elements."""
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", inline_limit)
    classic_models.string_model(tmp_path)
    model = loaded(tmp_path)
    assert model.inputs[0].datatype == "BYTES"
    for values in ([b"hello", b"wo\x00rld", b""], [b"a much longer second request"]):
        text = np.array(values, dtype=object)
        result = (await model.infer({"text": text}))["out"]
        assert [element.encode() for element in result.ravel()] == values
        assert result.shape == (len(values), 1)
