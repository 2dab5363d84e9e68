"""The example's own calculators: plain Python around the model, referenced from graph.pbtxt.

`StandardizeCalculator` turns raw centimetres into what the model was trained on;
`TopClassCalculator` turns scores into a class name and its probability. graph.pbtxt names them
`iris_calculators:StandardizeCalculator` and `iris_calculators:TopClassCalculator`; the server
finds this module through `--python_path`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphruntime import Calculator, CalculatorContext, Input, Output

CLASSES = np.array([b"setosa", b"versicolor", b"virginica"], dtype=object)
# Mean and standard deviation of each measurement in the training data.
MEAN = np.array([5.84, 3.06, 3.76, 1.20], dtype=np.float32)
STD = np.array([0.83, 0.44, 1.77, 0.76], dtype=np.float32)


class StandardizeCalculator(Calculator):
    """Raw measurements (any numeric dtype, [N, 4]) -> standardized FP32 features."""

    measurements = Input("", object)
    features = Output("", object)
    blocking = False  # cheap numpy work: run on the event loop, no thread hop

    def process(self, cc: CalculatorContext) -> None:
        raw = np.asarray(cc.inputs[self.measurements].payload, dtype=np.float32)
        if raw.ndim != 2 or raw.shape[1] != 4:
            raise ValueError(f"measurements must be [N, 4], got {list(raw.shape)}")
        cc.outputs[self.features].add((raw - MEAN) / STD)


class TopClassCalculator(Calculator):
    """Scores (an openvino.Tensor) -> class names (BYTES) and their softmax probabilities."""

    scores = Input("", object)
    label = Output("LABEL", object)
    probability = Output("PROBABILITY", object)
    blocking = False

    def process(self, cc: CalculatorContext) -> None:
        scores: Any = cc.inputs[self.scores].payload.data
        exp = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probabilities = exp / exp.sum(axis=-1, keepdims=True)
        best = probabilities.argmax(axis=-1)
        cc.outputs[self.label].add(CLASSES[best])
        cc.outputs[self.probability].add(probabilities.max(axis=-1).astype(np.float32))
