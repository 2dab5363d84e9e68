"""A model version counts OVMS's numbers of its inferences (when the server's /metrics wants
them: `count_inferences`), on every path an inference takes.

Inline on the event loop (a tiny model), on the pool's threads (forced by an inline limit of
zero), and with calls waiting for the only infer request: each inference is one wait and one
inference time, the calls in flight and the infer requests in use go back to zero, and waits
that queued behind the pool are longer than those that did not. The model is a real IR.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from servables.ov_model import model as model_module
from servables.ov_model.inference_stats import OVMS_US_BUCKETS
from servables.ov_model.model import OpenVINOModel


def scale_model(directory: Path, count: bool = True) -> OpenVINOModel:
    import openvino as ov
    import openvino.opset13 as ops

    x = ops.parameter([-1, 3], ov.Type.f32, name="x")
    x.output(0).get_tensor().set_names({"x"})
    y = ops.multiply(x, ops.constant(np.float32(2)))
    y.output(0).get_tensor().set_names({"y"})
    ov.save_model(ov.Model([ops.result(y)], [x], "scale"), directory / "model.xml")
    model = OpenVINOModel("scale", 1, directory, nireq=1, count_inferences=count)
    model.load()
    model.start()
    return model


def test_buckets_are_ovms_microsecond_buckets() -> None:
    assert OVMS_US_BUCKETS[:5] == (10.0, 18.0, 32.0, 58.0, 104.0)
    assert len(OVMS_US_BUCKETS) == 33 and OVMS_US_BUCKETS[-1] == 1474755971.0


@pytest.mark.parametrize("inline", [True, False])
async def test_each_inference_is_one_wait_and_one_inference_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inline: bool
) -> None:
    if not inline:
        monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)
    model = scale_model(tmp_path)
    assert model.streams >= 1 and model.nireq == 1
    calls = 12
    results = await asyncio.gather(
        *(model.infer({"x": np.full((2, 3), i, np.float32)}) for i in range(calls))
    )
    assert [r["y"][0, 0] for r in results] == [2.0 * i for i in range(calls)]
    stats = model.stats
    assert stats is not None
    assert stats.inference_us.count == calls
    assert stats.waiting_us.count == calls
    assert stats.inference_us.total > 0
    assert (stats.current_requests, stats.active) == (0, 0)


async def test_calls_in_flight_and_infer_requests_in_use_are_counted_while_they_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model_module, "INLINE_MAX_SECONDS", 0.0)  # on the pool's one thread
    model = scale_model(tmp_path)
    big = np.ones((400_000, 3), np.float32)
    calls = [asyncio.ensure_future(model.infer({"x": big})) for _ in range(3)]
    await asyncio.sleep(0)  # every call has started; one holds the only infer request
    stats = model.stats
    assert stats is not None
    seen = (stats.current_requests, stats.active)
    await asyncio.gather(*calls)
    assert seen == (3, 1)
    # The second and third waited for the first: their waits are the longest ones.
    waits = stats.waiting_us
    assert waits.count == 3 and waits.total > stats.inference_us.total / 3


async def test_a_failed_call_leaves_nothing_in_flight(tmp_path: Path) -> None:
    model = scale_model(tmp_path)
    with pytest.raises(Exception, match="Invalid shape of input x"):
        await model.infer({"x": np.ones((2, 4), np.float32)})
    assert model.stats is not None
    assert (model.stats.current_requests, model.stats.active) == (0, 0)
    assert model.stats.inference_us.count == 0


async def test_without_metrics_nothing_is_counted(tmp_path: Path) -> None:
    model = scale_model(tmp_path, count=False)
    assert model.stats is None
    result = await model.infer({"x": np.ones((1, 3), np.float32)})
    assert result["y"].tolist() == [[2.0, 2.0, 2.0]]
