"""servables.llm.gguf_requantize: channel-wise rounding, OpenVINO's i4 packing, and the rewrite
of a graph's quantized weights (on small graphs built here, run by OpenVINO itself)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

from servables.llm.gguf_requantize import channelwise, requantize

ov: Any = importlib.import_module("openvino")
ops: Any = importlib.import_module("openvino.opset13")


def folded(output: Any) -> Any:
    """The value of a constant-only subgraph, as OpenVINO computes it."""
    compiled = ov.Core().compile_model(ov.Model([output], [], "value"), "CPU")
    request = compiled.create_infer_request()
    request.infer()
    return np.array(request.get_output_tensor(0).data)


@pytest.mark.parametrize("bits", [4, 8])
def test_each_rows_largest_magnitude_is_the_lowest_code(bits: int) -> None:
    weights = np.random.default_rng(0).standard_normal((16, 64)).astype(np.float32)
    weights[3, 5] = 9.0  # a positive extreme: its scale turns negative
    codes, scales = channelwise(weights, bits)
    levels = 1 << (bits - 1)
    assert scales.shape == (16, 1) and scales.dtype == np.float16
    assert codes.min() >= -levels and codes.max() <= levels - 1
    extremes = np.abs(weights).argmax(axis=1)
    assert (codes[np.arange(16), extremes] == -levels).all()
    step = np.abs(scales.astype(np.float32))
    error = np.abs(codes * scales.astype(np.float32) - weights)
    # Half a step, except opposite the extreme, where the top code is one level short.
    clipped = np.sign(weights) == np.sign(scales.astype(np.float32))
    assert (error[~clipped] <= (0.5 * step + 1e-3 * np.abs(weights))[~clipped]).all()
    assert (error <= step + 1e-3 * np.abs(weights)).all()


def test_a_zero_row_stays_zero() -> None:
    weights = np.zeros((2, 32), np.float32)
    weights[1] = 1.0
    codes, scales = channelwise(weights, 4)
    assert not np.isnan(scales.astype(np.float32)).any()
    assert (codes[0] == 0).all() and (codes[1] == -8).all()


def u4_weight(codes: Any, zero: int, scales: Any) -> Any:
    """genai's decompression of a GGUF block type: u4 codes, u4 zero points, f16 scales per
    group of 32, reshaped to (rows, columns), then f32."""
    rows, columns = codes.shape
    groups = columns // 32
    packed = ov.op.Constant(ov.Type.u4, ov.Shape([rows, groups, 32]), codes.reshape(-1).tolist())
    zeros = ov.op.Constant(ov.Type.u4, ov.Shape([rows, groups, 1]), [zero] * rows * groups)
    centred = ops.subtract(ops.convert(packed, ov.Type.f16), ops.convert(zeros, ov.Type.f16))
    scaled = ops.multiply(centred, ops.constant(scales.reshape(rows, groups, 1)))
    shaped = ops.reshape(scaled, ops.constant(np.array([rows, columns], np.int64)), False)
    return ops.convert(shaped, ov.Type.f32)


def test_quantized_weights_are_rewritten_and_float_ones_kept() -> None:
    random = np.random.default_rng(1)
    codes = random.integers(0, 16, (48, 64))
    scales = (random.random((48, 2)) * 0.1 + 0.01).astype(np.float16)
    table = u4_weight(codes, 8, scales)  # a Q4_0 matrix: an embedding tied to the lm_head
    exact = (codes - 8).reshape(48, 2, 32) * scales.astype(np.float32)[..., None]
    exact = exact.reshape(48, 64)
    float_weight = random.standard_normal((64, 64)).astype(np.float32)

    tokens = ops.parameter([1, 3], ov.Type.i64, name="tokens")
    hidden = ops.gather(table, tokens, ops.constant(np.int64(0)))
    hidden = ops.matmul(hidden, ops.constant(float_weight), False, True)
    logits = ops.matmul(hidden, table, False, True)
    model = ov.Model([logits], [tokens], "tiny")

    assert requantize(model, 4) == 1  # one table, shared by the Gather and the lm_head
    ids = np.array([[0, 7, 47]], np.int64)
    got = ov.Core().compile_model(model, "CPU")({"tokens": ids})[0]

    rows, row_scales = channelwise(exact.astype(np.float32), 4)
    requantized = rows * row_scales.astype(np.float32)
    hidden_want = requantized[ids[0]] @ float_weight.T
    want = hidden_want @ requantized.T
    np.testing.assert_allclose(got[0], want, rtol=1e-3, atol=1e-3)
    kinds = {op.get_output_element_type(0).get_type_name() for op in model.get_ordered_ops()}
    assert "i4" in kinds and "u4" not in kinds


def test_int4_codes_are_packed_as_openvino_reads_them() -> None:
    from servables.llm.gguf_requantize import _weight_node

    weights = np.random.default_rng(2).standard_normal((8, 96)).astype(np.float32)
    for bits in (4, 8):
        codes, scales = channelwise(weights, bits)
        value = folded(_weight_node(weights, bits).output(0))
        np.testing.assert_array_equal(value, codes * scales.astype(np.float32))
