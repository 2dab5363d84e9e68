"""User calculators for the KServe end-to-end tests, loaded by the server with --python_path.

They are what a user would write: plain Python, numpy in and out, referenced from graph.pbtxt
either as `kserve_test_calcs:ClassName` or, for the function below, by the name it registers
when the server imports this module (--import kserve_test_calcs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphrt.kserve.types import InferRequest, InferResponse, tensor_from
from graphruntime import (
    Calculator,
    CalculatorContext,
    Input,
    InputSidePacket,
    Output,
    calculator_function,
)

Array = np.ndarray[Any, Any]


class Standardize(Calculator):
    """Pre-processing: zero mean, unit variance per row, as float32 for the model."""

    values = Input("", object)
    standardized = Output("", object)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        x = np.asarray(cc.inputs[self.values].payload, dtype=np.float32)
        mean = x.mean(axis=-1, keepdims=True)
        std = x.std(axis=-1, keepdims=True) + 1e-6
        cc.outputs[self.standardized].add(((x - mean) / std).astype(np.float32))


@calculator_function(inputs=["SCORES"], outputs=["LABEL"], name="ArgmaxCalculator")
def argmax(scores: Any) -> Array:
    """Post-processing: the index of the best score in each row (scores may be an ov.Tensor)."""
    return np.argmax(np.asarray(scores.data), axis=-1).astype(np.int64)


class RunningSum(Calculator):
    """Sums every packet it has seen in this run: state that lives as long as the stream."""

    value = Input("", object)
    total = Output("TOTAL", object)
    doubled = Output("DOUBLED", object)
    blocking = False

    def open(self, cc: CalculatorContext) -> None:
        self.sum: Array | None = None

    def process(self, cc: CalculatorContext) -> None:
        value = np.asarray(cc.inputs[self.value].payload)
        self.sum = value if self.sum is None else self.sum + value
        cc.outputs[self.total].add(self.sum.copy())
        cc.outputs[self.doubled].add(value * 2)


class Decorate(Calculator):
    """BYTES in, BYTES out: upper-cases each UTF-8 string and appends the SUFFIX side packet."""

    text = Input("", object)
    suffix = InputSidePacket("SUFFIX", str)
    decorated = Output("", object)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        suffix = cc.input_side_packets[self.suffix].payload
        texts = cc.inputs[self.text].payload
        result = np.array(
            [(t.decode().upper() + suffix).encode() for t in texts.ravel()], dtype=object
        )
        cc.outputs[self.decorated].add(result.reshape(texts.shape))


class Explode(Calculator):
    """Fails in Process when a value is negative: how a user's bug reaches the client."""

    value = Input("", object)
    same = Output("", object)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        value = np.asarray(cc.inputs[self.value].payload)
        if (value < 0).any():
            raise ValueError("negative values are not allowed here")
        cc.outputs[self.same].add(value)


class Summarize(Calculator):
    """Takes the whole KServe request (REQUEST tag) and builds the whole response (RESPONSE)."""

    request = Input("REQUEST", InferRequest)
    response = Output("RESPONSE", InferResponse)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        request = cc.inputs[self.request].payload
        sums = [tensor_from(f"sum_{t.name}", np.asarray(t.data).sum()) for t in request.inputs]
        cc.outputs[self.response].add(
            InferResponse("", "", request.id, sums, {"inputs": len(request.inputs)})
        )


class FailOnRequest(Calculator):
    """Takes an OpenAI request and fails with a plain RuntimeError: a bug in user code."""

    request = Input("HTTP_REQUEST_PAYLOAD", object)
    response = Output("HTTP_RESPONSE_PAYLOAD", bytes)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        raise RuntimeError("injected failure in a user calculator")
