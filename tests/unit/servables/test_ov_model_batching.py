"""Dynamic batching on a real OpenVINO model: the batch dimension at load, and batched results.

The models are tiny IR files written here. Inference runs on the model's threads (the inline
limit is set to 0), where a running batch keeps the model busy, so concurrent calls queue and are
stacked; each result is compared bit for bit with the same call run without batching.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servables.errors import InvalidRequest, ServableLoadError
from servables.ov_model import model as model_module
from servables.ov_model.batching_config import DynamicBatchingConfig
from servables.ov_model.model import OpenVINOModel

WIDTH = 8


def save_mlp(directory: Path, batch: int = -1) -> None:
    """y = relu(x @ W1) @ W2, x FP32 [batch, WIDTH]; z = x summed per row (a second output)."""
    import openvino as ov
    import openvino.opset13 as ops

    rng = np.random.default_rng(0)
    x = ops.parameter([batch, WIDTH], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    x.set_layout(ov.Layout("NC"))  # batch_size needs to know which dimension is the batch
    w1 = ops.constant(rng.standard_normal((WIDTH, 64)).astype(np.float32))
    w2 = ops.constant(rng.standard_normal((64, 5)).astype(np.float32))
    y = ops.matmul(ops.relu(ops.matmul(x, w1, False, False)), w2, False, False)
    y.output(0).get_tensor().set_names({"y"})
    z = ops.reduce_sum(x, ops.constant(np.int64(1)), keep_dims=False)
    z.output(0).get_tensor().set_names({"z"})
    ov.save_model(ov.Model([ops.result(y), ops.result(z)], [x], "mlp"), directory / "model.xml")


def loaded(directory: Path, batching: dict[str, Any] | None, **settings: Any) -> OpenVINOModel:
    config = DynamicBatchingConfig.from_json(batching, "dynamic_batching")
    model = OpenVINOModel("mlp", 1, directory, dynamic_batching=config, nireq=2, **settings)
    model.load()
    model.start()
    return model


def calls(count: int) -> list[np.ndarray[Any, Any]]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal((1 + i % 3, WIDTH)).astype(np.float32) for i in range(count)]


async def test_concurrent_calls_are_batched_and_bit_identical_to_single_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)  # on threads: the model is busy
    save_mlp(tmp_path)
    alone = loaded(tmp_path, None)
    batched = loaded(tmp_path, {"max_batch_size": 8})
    inputs = calls(48)
    expected = [await alone.infer({"x": x}) for x in inputs]
    results = await asyncio.gather(*(batched.infer({"x": x}, ["z", "y"]) for x in inputs))
    for want, got in zip(expected, results, strict=True):
        assert list(got) == ["z", "y"]
        for name in ("y", "z"):
            assert got[name].tobytes() == want[name].tobytes()
            assert got[name].shape == want[name].shape
    stats = batched.batch_stats
    assert stats.all_requests == len(inputs)
    assert stats.all_batches < len(inputs)  # some calls shared an inference
    rows_per_batch, _, _ = stats.histograms()
    assert rows_per_batch.total == sum(x.shape[0] for x in inputs)
    assert rows_per_batch.counts[3] == stats.all_batches  # none over max_batch_size (8)


async def test_a_bad_call_fails_alone_before_it_is_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)
    save_mlp(tmp_path)
    model = loaded(tmp_path, {})
    good = calls(6)
    bad = np.zeros((1, WIDTH + 1), np.float32)
    results = await asyncio.gather(
        *(model.infer({"x": x}) for x in good[:3]),
        model.infer({"x": bad}),
        *(model.infer({"x": x}) for x in good[3:]),
        return_exceptions=True,
    )
    assert isinstance(results[3], InvalidRequest)
    assert "Invalid shape of input x" in results[3].message
    assert all(isinstance(r, dict) for i, r in enumerate(results) if i != 3)


def test_concurrent_batches_default_to_the_models_streams(tmp_path: Path) -> None:
    save_mlp(tmp_path)
    model = loaded(tmp_path, {})
    assert model.dynamic_batching is not None
    streams = int(model._compiled.get_property("NUM_STREAMS"))
    assert model.dynamic_batching.max_concurrent_batches == max(1, min(streams, model.nireq))
    assert loaded(tmp_path, {"max_concurrent_batches": 5}).dynamic_batching == (
        DynamicBatchingConfig(max_concurrent_batches=5)
    )


def test_a_static_batch_in_the_file_is_made_dynamic(tmp_path: Path) -> None:
    save_mlp(tmp_path, batch=1)
    model = loaded(tmp_path, {"max_batch_size": 4})
    assert model.inputs[0].shape == (-1, WIDTH)
    assert [spec.shape for spec in model.outputs] == [(-1, 5), (-1,)]
    unbatched = loaded(tmp_path, None)
    assert unbatched.inputs[0].shape == (1, WIDTH)


@pytest.mark.parametrize(
    "settings", [{"batch_size": "1"}, {"shape": "(1,8)"}, {"shape": {"x": "[2, 8]"}}]
)
def test_a_batch_pinned_by_the_config_fails_the_load(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    save_mlp(tmp_path)
    with pytest.raises(ServableLoadError, match="dynamic_batching needs a dynamic batch"):
        loaded(tmp_path, {}, **settings)


def test_batch_size_auto_goes_with_dynamic_batching(tmp_path: Path) -> None:
    save_mlp(tmp_path, batch=1)
    model = loaded(tmp_path, {}, batch_size="auto")
    assert model.inputs[0].shape == (-1, WIDTH)


def test_model_config_reads_dynamic_batching(tmp_path: Path) -> None:
    from servables.ov_model.versions import ModelConfig

    entry = {
        "config": {
            "name": "mlp",
            "base_path": "mlp",
            "dynamic_batching": {"max_batch_size": 8, "preferred_batch_size": [4]},
        }
    }
    config = ModelConfig.from_json(entry, tmp_path, "model_config_list[0]")
    assert config.dynamic_batching == DynamicBatchingConfig(8, (4,), 0, None)
    plain = ModelConfig.from_json({"config": {"name": "m", "base_path": "m"}}, tmp_path, "m")
    assert plain.dynamic_batching is None
    entry["config"]["dynamic_batching"] = {"max_batch_size": "8"}
    with pytest.raises(ValueError, match=r"model_config_list\[0\]\.config\.dynamic_batching"):
        ModelConfig.from_json(entry, tmp_path, "model_config_list[0]")
