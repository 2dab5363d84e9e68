"""Pooling and normalisation added to the embedding model's graph, as OVMS and openvino-genai do.

The exported model returns hidden states per token ([batch, tokens, hidden]); a sentence
embedding is one of them (CLS: the first token; LAST: the last real token, found with the
attention mask so right padding is fine) or their mean over real tokens (MEAN), then optionally
L2-normalised. Doing this inside the compiled model keeps the output small ([batch, hidden]) and
lets OpenVINO fuse it. Models exported by sentence-transformers' path have several outputs; the
first with three dimensions is the token-level one (as in OVMS).
"""

from __future__ import annotations

from typing import Any

POOLING_MODES = ("CLS", "LAST", "MEAN")


def hidden_state_index(model: Any) -> int:
    """Index of the first output with three dimensions (the token states)."""
    for index, output in enumerate(model.outputs):
        if output.get_partial_shape().rank.get_length() == 3:
            return index
    raise ValueError("the embedding model has no output with three dimensions (token states)")


def add_pooling(model: Any, pooling: str, normalize: bool) -> tuple[Any, int]:
    """The model with its token-state output replaced by [batch, hidden] embeddings, and the
    index of that output."""
    import numpy as np
    import openvino.opset13 as ops

    if pooling not in POOLING_MODES:
        raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLING_MODES}")
    mask = next(port for port in model.inputs if port.get_any_name() == "attention_mask")
    axis = ops.constant(np.array([1], dtype=np.int64))

    def pool(hidden: Any) -> Any:
        if pooling == "CLS":
            pooled = ops.gather(hidden, ops.constant(np.int64(0)), ops.constant(np.int64(1)))
        elif pooling == "LAST":
            lengths = ops.reduce_sum(ops.convert(mask, "i64"), axis, keep_dims=False)
            last = ops.subtract(lengths, ops.constant(np.int64(1)))
            pooled = ops.gather(hidden, last, ops.constant(np.int64(1)), batch_dims=1)
        else:
            element = hidden.get_element_type()
            weights = ops.convert(ops.unsqueeze(mask, ops.constant(np.int64(-1))), element)
            summed = ops.reduce_sum(ops.multiply(hidden, weights), axis, keep_dims=False)
            counts = ops.reduce_sum(weights, axis, keep_dims=False)
            floor = ops.convert(ops.constant(np.array([1e-9], dtype=np.float32)), element)
            pooled = ops.divide(summed, ops.maximum(counts, floor))
        if normalize:
            pooled = ops.normalize_l2(pooled, axis, eps=1e-12, eps_mode="max")
        return ops.convert(pooled, "f32").output(0)

    index = hidden_state_index(model)
    result = model.get_results()[index]
    result.input(0).replace_source_output(pool(result.input_value(0)))
    model.validate_nodes_and_infer_types()
    return model, index
